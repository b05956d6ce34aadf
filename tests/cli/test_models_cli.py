from kit.cli.main import main
from kit.models import model_names


def test_models_lists_every_entry(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in model_names():
        assert name in out
    assert "input_ids.1 1x384 int64" in out and "text 100x77 int64 (fixed)" in out


def test_export_prints_figures_and_models_reads_the_cache(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    assert main(["export", "widedeep-tf-fp32", "--small"]) == 0
    out = capsys.readouterr().out
    assert "max abs diff" in out and "MB" in out and "params:" in out
    assert main(["models", "--small"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("widedeep"))
    assert "FLOP" in line and "(ref)" not in line


def test_unknown_model_is_a_clear_error(capsys):
    assert main(["export", "nope"]) == 2
    assert "known: " in capsys.readouterr().err
