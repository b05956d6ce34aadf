"""Executed notebook -> self-contained HTML: no input cells, images embedded, no remote assets."""

from __future__ import annotations

import re
from pathlib import Path

from kit import atomic

REMOTE_TAG = re.compile(
    r"<(script|link)\b[^>]*\b(?:src|href)=[\"']https?://[^\"']*[\"'][^>]*>(?:\s*</script>)?",
    re.IGNORECASE,
)


def strip_remote_assets(page: str) -> str:
    """Drop <script src=http...> and <link href=http...>: pages must render offline."""
    return REMOTE_TAG.sub("", page)


def notebook_to_html(notebook: Path, html_path: Path) -> Path:
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        template_name="lab",
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    exporter.mathjax_url = ""
    exporter.require_js_url = ""
    nb = nbformat.read(str(notebook), as_version=4)
    body, _ = exporter.from_notebook_node(nb)
    return atomic.write_text(html_path, strip_remote_assets(body))
