"""The `kit` command under an ASCII locale (LANG=C, PYTHONUTF8=0): what it prints beyond ASCII comes
out as ASCII look-alikes; `kit compare` died on a UnicodeEncodeError after writing its HTML."""

import os
import subprocess
import sys

import numpy as np

from kit.cli.main import ascii_look_alike  # noqa: F401  (registers the "kit-ascii" handler)
from tests.conftest import ROOT
from tests.publish.test_compare_runs import _run


def ascii_env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONIOENCODING"))}
    return {
        **env,
        "LANG": "C",
        "LC_ALL": "C",
        "PYTHONUTF8": "0",
        "PYTHONCOERCECLOCALE": "0",
        "PYTHONPATH": str(ROOT),
        "KIT_OUTPUTS": str(tmp_path / "outputs"),
    }


def kit(tmp_path, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kit.cli.main", *args],
        capture_output=True,
        env=ascii_env(tmp_path),
        timeout=120,
    )


def test_kit_compare_prints_its_report_in_an_ascii_locale(tmp_path):
    rng = np.random.default_rng(3)
    a, b = _run(tmp_path / "a", rng, 10.0), _run(tmp_path / "b", rng, 12.0, cpu="Other CPU")
    done = kit(tmp_path, "compare", str(a), str(b), "--out", str(tmp_path / "x.html"))
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    out = done.stdout.decode("ascii")  # nothing beyond ASCII reached the terminal
    assert " +/- " in out and out.rstrip().endswith(f"HTML: {tmp_path / 'x.html'}")
    assert done.stderr == b""
    assert "±" in (tmp_path / "x.html").read_text(encoding="utf-8")  # the page itself keeps UTF-8


def test_an_error_line_beyond_ascii_is_one_line_too(tmp_path):
    """An error message names a path with a character the locale cannot encode."""
    done = kit(tmp_path, "export-bytemlperf", str(tmp_path / "résultat—1.json"))
    assert done.returncode == 2
    name = tmp_path / "résultat—1.json"  # the bytes it was given, as it was given them
    assert (
        done.stderr
        == (
            f"error: {name}: no such result file; give result JSON files "
            "(outputs/runs/<run_id>/<job>.json)\n"
        ).encode()
    )


def test_look_alikes():
    assert "± — × ÷ · ≥ … é ® 中".encode("ascii", "kit-ascii") == b"+/- - x / . >= ... e (R) ?"
    assert "\udcc3\udca9".encode("ascii", "kit-ascii") == "é".encode()  # undecoded argv bytes
    # only what latin-1 lacks
    assert "café —".encode("latin-1", "kit-ascii") == "café -".encode("latin-1")
