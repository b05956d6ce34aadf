"""The index page's content at a glance: a headline chart (published IPU figure against the
figure measured here, log scale, per published row) and the script that sorts and filters the
scorecard table (kit.publish.card_table).

Plain HTML, inline SVG and a few lines of inline JavaScript: no remote scripts, works offline.
Built only from the summary job's scorecard records (kit.publish.scorecard rows as dicts).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import TypeGuard

from kit.publish import glance
from kit.publish.card_table import CARD_STYLE
from kit.publish.compare import Comparison
from kit.publish.scorecard import measured_text, readable
from kit.published.studies import PublishedStudy

STYLE_EXTRA = (
    CARD_STYLE
    + """
.chart text{font-size:11px;fill:#222}.chart .axis{stroke:#999}.chart .grid{stroke:#eee}
.chart .pub{fill:#d95f02}.chart .meas{fill:#1b6ac9}.chart .bar{stroke:#1b6ac9;stroke-width:1.5}
.chart .none{fill:#888;font-style:italic}
#scorecard th{cursor:pointer;user-select:none}#scorecard th.sorted-asc::after{content:" \\25B2"}
#scorecard th.sorted-desc::after{content:" \\25BC"}.filters{margin:.5em 0}
.glance{background:#f7f9fc;border:1px solid #dde3ec;padding:.2em 1em .4em;margin:1em 0}
.glance li{margin:.25em 0}
@media (max-width:600px){body{margin:.7em}h1{font-size:1.4em}}"""
)

# published rows shown in the headline chart: (study, figure)
HEADLINE = ((PublishedStudy.BYTEMLPERF_C600, "QPS"), (PublishedStudy.C2_QWANT, "Throughput"))


def _finite(x: object) -> TypeGuard[float]:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def headline_chart(card: Sequence[glance.Row], width: int = 1100) -> str:
    """Inline SVG: one line per published row, the published IPU figure and the figure measured
    here (with its 95 % interval) on a shared log axis; the hardware named in the legend and per
    row."""
    rows = [r for r in glance.rows_of(card) if (r.study, r.figure) in HEADLINE]
    if not rows:
        return "<p>Headline chart: — (no scorecard in this batch: the summary job did not run)</p>"
    values = [
        v
        for r in rows
        for v in (r.published, r.measured, r.measured_low, r.measured_high)
        if _finite(v)
    ]
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    hi = max(hi, lo + 1)
    left, right, top, step = 300, 260, 56, 22
    plot_w = width - left - right
    height = top + step * len(rows) + 40

    def x(v: float) -> float:
        return left + (math.log10(v) - lo) / (hi - lo) * plot_w

    parts = [
        "<svg class='chart' id='headline-chart' xmlns='http://www.w3.org/2000/svg' "
        f"width='{width}' height='{height}' role='img' aria-label='published IPU figure against "
        "the figure measured here'>"
    ]
    for d in range(lo, hi + 1):
        gx = x(10**d)
        parts.append(
            f"<line class='grid' x1='{gx:.1f}' y1='{top - 8}' x2='{gx:.1f}' y2='{height - 30}'/>"
            f"<text x='{gx:.1f}' y='{height - 14}' text-anchor='middle'>1e{d}</text>"
        )
    pub_hw = sorted({r.published_hardware for r in rows})
    parts.append(
        f"<circle class='pub' cx='{left}' cy='14' r='5'/><text x='{left + 9}' y='18'>published: "
        f"{html.escape('; '.join(pub_hw))}</text>"
        f"<rect class='meas' x='{left - 5}' y='25' width='10' height='10'/>"
        f"<text x='{left + 9}' y='34'>measured here, with its 95 % interval (hardware at the "
        "right)</text>"
    )
    for i, r in enumerate(rows):
        parts += _chart_row(r, top + step * i + 8, left, plot_w, x)
    parts.append("</svg>")
    return (
        "<h2>Published IPU figures against the figures measured here</h2>"
        "<p>Log scale. Circles: the published figure on the hardware in the legend; squares with "
        "bars: the figure measured here with its 95 % interval, on the hardware named at the "
        "right.</p>" + "<div class='wide'>" + "".join(parts) + "</div>"
    )


def _chart_row(r: Comparison, y: int, left: int, plot_w: int, x) -> list[str]:
    """One published row of the headline chart: its label, the published point, the measured one
    with its interval and hardware (or why there is none)."""
    per_batch = r.study == PublishedStudy.C2_QWANT
    label = f"{r.model} {r.precision}" + (f" bs {r.batch_size}" if per_batch else "")
    parts = [
        f"<g class='row' data-model='{html.escape(str(r.model))}'>"
        f"<text x='{left - 8}' y='{y + 4}' text-anchor='end'>{html.escape(label)} "
        f"({html.escape(r.unit)})</text><line class='axis' x1='{left}' y1='{y}' "
        f"x2='{left + plot_w}' y2='{y}' stroke-dasharray='2,3'/>"
    ]
    if _finite(r.published):
        parts.append(
            f"<circle class='pub' cx='{x(r.published):.1f}' cy='{y}' r='5'>"
            f"<title>published {readable(r.published, 6)} {html.escape(r.unit)}</title></circle>"
        )
    if _finite(r.measured):
        if _finite(r.measured_low) and _finite(r.measured_high):
            parts.append(
                f"<line class='bar' x1='{x(r.measured_low):.1f}' y1='{y}' "
                f"x2='{x(r.measured_high):.1f}' y2='{y}'/>"
            )
        mx = x(r.measured)
        parts.append(
            f"<rect class='meas' x='{mx - 4:.1f}' y='{y - 4}' width='8' height='8'>"
            f"<title>measured {html.escape(measured_text(r))} {html.escape(r.unit)}</title></rect>"
        )
        hw = r.measured_hardware.split(" (")[0]
        parts.append(f"<text x='{left + plot_w + 8}' y='{y + 4}'>{html.escape(hw[:40])}</text>")
    else:
        parts.append(
            f"<text class='none' x='{left + plot_w + 8}' y='{y + 4}'>— "
            f"{html.escape(glance.short_reason(r)[:44])}</text>"
        )
    return [*parts, "</g>"]


SCRIPT = r"""
(function(){
  var table=document.getElementById('scorecard'); if(!table) return;
  var body=table.tBodies[0], heads=table.tHead.rows[0].cells;
  var text=document.getElementById('filter'), verdict=document.getElementById('verdict-filter');
  function key(row, col, num){
    var cell=row.cells[col]; if(!num) return cell.textContent.toLowerCase();
    var v=cell.getAttribute('data-v'); return v===null ? null : parseFloat(v);
  }
  function sortBy(th, asc){
    var col=+th.getAttribute('data-col'), num=th.getAttribute('data-type')==='num';
    Array.prototype.forEach.call(heads, function(h){h.classList.remove('sorted-asc','sorted-desc');});
    th.classList.add(asc?'sorted-asc':'sorted-desc');
    var rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(a,b){
      var x=key(a,col,num), y=key(b,col,num);
      if(x===null&&y===null) return 0; if(x===null) return 1; if(y===null) return -1;  // blanks last
      return (x<y?-1:x>y?1:0)*(asc?1:-1);
    });
    rows.forEach(function(r){body.appendChild(r);});
  }
  function filter(){
    var q=text.value.toLowerCase(), v=verdict.value, shown=0;
    Array.prototype.forEach.call(body.rows, function(r){
      var ok=(!q||r.textContent.toLowerCase().indexOf(q)>=0)&&(!v||r.getAttribute('data-verdict')===v);
      r.style.display=ok?'':'none'; shown+=ok?1:0;
    });
    document.getElementById('shown').textContent=shown+' rows';
  }
  function remember(){  // the view lives in the address (#sort=4:desc&q=resnet&verdict=...): shareable
    var th=table.querySelector('th.sorted-asc,th.sorted-desc'), parts=[];
    if(th) parts.push('sort='+th.getAttribute('data-col')+':'+(th.classList.contains('sorted-asc')?'asc':'desc'));
    if(text.value) parts.push('q='+encodeURIComponent(text.value));
    if(verdict.value) parts.push('verdict='+encodeURIComponent(verdict.value));
    history.replaceState(null, '', parts.length ? '#'+parts.join('&') : location.pathname);
  }
  Array.prototype.forEach.call(heads, function(th){
    th.addEventListener('click', function(){ sortBy(th, !th.classList.contains('sorted-asc')); remember(); });
  });
  text.addEventListener('input', function(){ filter(); remember(); });
  verdict.addEventListener('change', function(){ filter(); remember(); });
  location.hash.replace(/^#/, '').split('&').forEach(function(kv){
    var i=kv.indexOf('='); if(i<0) return;
    var k=kv.slice(0,i), v=decodeURIComponent(kv.slice(i+1));
    if(k==='sort'){ var p=v.split(':'); if(heads[+p[0]]) sortBy(heads[+p[0]], p[1]!=='desc'); }
    if(k==='q') text.value=v;
    if(k==='verdict') verdict.value=v;
  });
  filter();
})();
"""  # noqa: E501
