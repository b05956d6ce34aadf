"""kit.endings: a killed tree's registered commands run once, and never for a reused pid."""

from __future__ import annotations

import json
import subprocess
import sys

from kit import endings


def test_a_registered_ending_runs_once_and_a_reused_pids_never(tmp_path, monkeypatch):
    monkeypatch.setenv(endings.ENV, str(tmp_path / "endings"))
    client = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        mark = tmp_path / "ended"
        endings.register(client.pid, [sys.executable, "-c", f"open({str(mark)!r}, 'w').close()"])
        assert endings.run_endings([client.pid, 1]) == [client.pid] and mark.exists()
        mark.unlink()
        assert endings.run_endings([client.pid]) == [] and not mark.exists()  # once

        path = endings.register(
            client.pid, [sys.executable, "-c", f"open({str(mark)!r}, 'w').close()"]
        )
        entry = json.loads(path.read_text())
        # another process's pid
        path.write_text(json.dumps({**entry, "started": entry["started"] - 100}))
        assert endings.run_endings([client.pid]) == [] and not mark.exists() and not path.exists()
    finally:
        client.kill()
        client.wait()
