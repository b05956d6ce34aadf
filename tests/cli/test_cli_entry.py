"""The command line is reached both ways a user types it."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_python_dash_m_kit_is_the_kit_command():
    done = subprocess.run(
        [sys.executable, "-m", "kit", "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.startswith("usage: kit "), done.stderr
