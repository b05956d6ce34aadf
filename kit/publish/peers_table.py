"""The peer benchmark on the index: the kit's chosen configuration per published row against what a
user would run instead (plain ONNX Runtime fp32, OpenVINO f32/bf16/int8), read from the JSON that
`make bench-peers` writes (outputs/bench/peers.json, benchmarks/peers.py). Nothing here measures.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

PEERS_FILE = Path("bench") / "peers.json"


def _ci(ci: list | None) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return "no interval"
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _rate(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}"


def _verdict(b: dict) -> str:
    """The benchmark's verdict on kit ÷ best peer (met, MISSED, inconclusive: from its interval);
    a file written before there was one judged the median alone, and says so."""
    if "verdict" in b:
        return str(b["verdict"])
    return f"{'met' if b.get('met') else 'MISSED'} (median only)"


def _verdict_cell(verdict: str, target: float) -> str:
    if verdict == "MISSED":
        return f"missed (all of the interval below {target:g})"
    if verdict == "inconclusive":
        return f"inconclusive (no interval, or it spans {target:g})"
    return verdict


def peer_rows(data: dict) -> list[dict]:
    """One row per published row and batch: kit's choice and throughput, the best peer's, kit ÷ best
    peer with its 95 % interval, kit ÷ plain ORT fp32, and the verdict on the target."""
    rows = []
    for r in data.get("rows", []):
        for b in r.get("batches", []):
            row = {
                "row": f"{r['model']} {r['published']}",
                "batch": b["batch_size"],
                # a GPU's per batch
                "kit_choice": (b.get("kit_decision") or r.get("kit") or {}).get("chosen", ""),
            }
            if "error" in b:
                rows.append({**row, "error": b["error"]})
                continue
            best = b["peers"].get(b.get("best_peer")) or {}
            ort = b["peers"].get("ort-fp32") or {}
            rows.append(
                {
                    **row,
                    "kit_rate": b["kit"]["throughput_median"],
                    "best_peer": b.get("best_peer") or "",
                    "peer_rate": best.get("throughput_median"),
                    "kit_over_best": b.get("kit_over_best"),
                    "kit_over_best_ci95": b.get("kit_over_best_ci95"),
                    "kit_over_ort": ort.get("kit_over_peer"),
                    "kit_over_ort_ci95": ort.get("ci95"),
                    "verdict": _verdict(b),
                }
            )
    return rows


def _html_row(r: dict, target: float) -> str:
    head = (
        f"<td>{html.escape(r['row'])}</td><td>{r['batch']}</td>"
        f"<td>{html.escape(r['kit_choice'])}</td>"
    )
    if "error" in r:
        return f"<tr>{head}<td colspan='6'>{html.escape(r['error'])}</td></tr>"
    ratio = (
        "—"
        if r["kit_over_best"] is None
        else f"{r['kit_over_best']:.2f} {_ci(r['kit_over_best_ci95'])}"
    )
    ort = (
        "—"
        if r["kit_over_ort"] is None
        else f"{r['kit_over_ort']:.2f} {_ci(r['kit_over_ort_ci95'])}"
    )
    return (
        f"<tr>{head}<td>{_rate(r['kit_rate'])}</td><td>{html.escape(r['best_peer'])}</td>"
        f"<td>{_rate(r['peer_rate'])}</td><td>{ratio}</td><td>{ort}</td>"
        f"<td>{html.escape(_verdict_cell(r['verdict'], target))}</td></tr>"
    )


def where(data: dict, env: dict, cpu: str | None) -> str:
    """The hardware the peers ran on, as the benchmark wrote it (a GPU: every arm host to host),
    else the CPU and its flags."""
    if data.get("ran_on"):
        return str(data["ran_on"])
    return f"CPU {cpu or 'unknown'}, flags {' '.join(data.get('cpu_flags', [])) or 'none'}"


def peers_section(out: Path) -> str:
    """The index's peer-benchmark section, or '' when `make bench-peers` has not written its
    JSON."""
    path = out / PEERS_FILE
    if not path.exists():
        return ""
    try:
        data = json.loads(path.read_text())
        rows = peer_rows(data)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return (
            f"<h2>Against what a user would run instead</h2><p>{html.escape(str(path))} "
            f"unreadable: {html.escape(str(exc))}</p>"
        )
    target = data.get("target", 0.95)
    env = data.get("environment") or {}
    cpu = (
        ((env.get("cpu") or {}).get("model"))
        if isinstance(env.get("cpu"), dict)
        else env.get("cpu")
    )
    counts = {v: sum(r.get("verdict") == v for r in rows) for v in ("met", "MISSED")}
    head = (
        "<tr><th>Row</th><th>Batch</th><th>Kit's choice</th><th>Kit samples/s</th><th>Best "
        "peer</th><th>Peer samples/s</th><th>Kit ÷ best peer [95 % CI]</th><th>Kit ÷ ORT fp32 [95 "
        f"% CI]</th><th>≥ {target:g}?</th></tr>"
    )
    return (
        f"<h2>Against what a user would run instead (make bench-peers)</h2>"
        f"<p>{counts['met']} of {len(rows)} row/batch pairs met {target:g} x the best peer (the "
        f"whole 95 % interval of the per-round ratios' median at or above it), "
        f"{counts['MISSED']} missed it (all below). {html.escape(data.get('method', ''))}; "
        f"{data.get('rounds')} rounds of {data.get('seconds')} s per arm; "
        f"{html.escape(where(data, env, cpu))}. From "
        f"<code>{PEERS_FILE.as_posix()}</code>.</p><div class='wide'><table "
        f"id='peers'>{head}{''.join(_html_row(r, target) for r in rows)}</table></div>"
    )
