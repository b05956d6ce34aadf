"""Render a page in headless Chromium (Debian's `chromium`) with no network, for checks."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urlparse

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
]  # nothing can resolve, so nothing can leave
# Chromium's own service calls (made whatever the page is); a page's request is anything else.
BROWSER_SERVICE_HOSTS = (
    "clients2.google.com",
    "update.googleapis.com",
    "accounts.google.com",
    "clientservices.googleapis.com",
    "redirector.gvt1.com",
    "safebrowsing.googleapis.com",
)
REMOTE_REF = re.compile(
    r"""(?:src|href)\s*=\s*["']https?://|url\(\s*["']?https?://|@import\s+["']?https?://""",
    re.IGNORECASE,
)


def find_chromium() -> str | None:
    return (
        shutil.which("chromium")
        or shutil.which("chromium-browser")
        or shutil.which("google-chrome")
    )


def remote_references(page: str) -> list[str]:
    """Places where a page would load something from the network."""
    return [m.group(0) for m in REMOTE_REF.finditer(page)]


def render(
    page: Path,
    screenshot: Path | None = None,
    size: str = "1300,1800",
    timeout: int = 90,
    fragment: str = "",
) -> tuple[str, list[str]]:
    """(DOM after load, URLs the page requested over the network); optionally a screenshot.
    `fragment` ('sort=4:desc') is added to the address after '#'."""
    exe = find_chromium()
    if exe is None:
        raise FileNotFoundError("no chromium on PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        netlog = Path(profile) / "net.json"
        base = [
            exe,
            *FLAGS,
            f"--user-data-dir={profile}/p",
            f"--window-size={size}",
            f"--log-net-log={netlog}",
        ]
        url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
        dom = subprocess.run(
            [*base, "--dump-dom", url], capture_output=True, text=True, timeout=timeout
        ).stdout
        requested = _page_requests(netlog)
        if screenshot is not None:
            subprocess.run(
                [*base, f"--screenshot={screenshot}", url], capture_output=True, timeout=timeout
            )
    return dom, requested


def _page_requests(netlog: Path) -> list[str]:
    if not netlog.exists():
        return []
    text = netlog.read_text(errors="replace")
    try:
        json.loads(text)
    except ValueError:
        pass  # Chromium may leave the log unterminated; the URLs are still there
    urls = set(re.findall(r'"url":"(https?://[^"]+)"', text))
    return sorted(u for u in urls if urlparse(u).hostname not in BROWSER_SERVICE_HOSTS)
