from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from kit.datasets.images import image_files, preprocess
from kit.errors import InvalidParameter, MissingResource
from kit.measure.window import MeasureConfig, measure
from kit.publish.report.plots import c2_tables
from kit.publish.scorecard import c2_rows, display_table
from kit.published import figures as published
from kit.results import ResultKind, RunResult
from kit.studies.c2 import Config as C2Config
from kit.studies.c2 import c2_row
from kit.studies.c2 import run as run_c2_study

FAST = dict(
    batch_sizes=(2, 4), small=True, min_duration_s=0.05, min_count=3, warmup=1, target_ci=0.0
)


def test_c2_protocol_small(outputs):
    result = run_c2_study(C2Config(**FAST))
    assert result.status == "ok", result.errors
    rows = result.tables.to_dict()["c2"]
    assert [r["batch_size"] for r in rows] == [2, 4] and [r["micro_batch"] for r in rows] == [1, 2]
    for r, m in zip(rows, result.measurements, strict=True):
        assert m.mode == "replicas" and m.threads == 2
        assert r["throughput"] == pytest.approx(r["batch_size"] / (r["latency_ms"] / 1000))
        assert r["efficiency"] is None and "power unavailable" in r["efficiency_reason"]
        assert m.power.method == "unavailable" and m.power.reason
    card = c2_rows([(Path("c2.json"), result)])
    latency = [c for c in card if c.figure == "Latency" and c.batch_size == "2"][0]
    assert latency.verdict == "not comparable" and latency.measured == rows[0]["latency_ms"]
    efficiency = [c for c in card if c.figure == "Energy efficiency" and c.batch_size == "2"][0]
    assert efficiency.verdict == "not measured" and efficiency.reason.startswith(
        "power unavailable"
    )
    assert [c.verdict for c in card if c.batch_size == "12"][0] == "not measured"
    # the report's tables 1-3: no NaN cell, the power reason said once (issue 27 #4)
    from kit.publish.report import Sentence, c2_views, power_view

    shown = c2_views(result)
    tables = [v for v in shown if isinstance(v, pd.DataFrame)]
    assert len(tables) == 3 and not any(t.isna().any().any() for t in tables)
    # batch 6 not run
    assert all((t.loc[6, ["Measured here", "Measured / published"]] == "—").all() for t in tables)
    assert (
        tables[0].loc[6, "Measured (95 % CI)"] == "— (batch not run)"
        and (tables[2].loc[[2, 4], "Measured (95 % CI)"] == "—").all()
    )
    notes = [v.text for v in shown if isinstance(v, Sentence) and not v.html.startswith("<h4>")]
    assert notes == [
        "Not measured here: power unavailable (the reason is under 'Power during the runs')."
    ]
    assert power_view(result).text.startswith("Power unavailable: ")


def test_batch_must_split_across_replicas():
    with pytest.raises(InvalidParameter, match="multiple of replicas=2"):
        C2Config(batch_sizes=(3,))


def test_replicas_zero_is_a_clear_error_not_a_zero_division():
    """Bug (issue 11): replicas=0 ended in ZeroDivisionError."""
    result = run_c2_study({**FAST, "replicas": 0})
    assert result.status == "error" and result.errors == [
        "InvalidParameter: invalid replicas=0: >= 1"
    ]


def test_device_is_checked_and_decides_the_power_sensor(outputs):
    with pytest.raises(InvalidParameter, match="device='tpu'"):
        C2Config(device="tpu")
    result = run_c2_study({**FAST, "batch_sizes": [2]})
    # the CPU's sensor, for a CPU run
    assert result.measurements[0].power.reason.startswith("rapl:")


def test_sessions_are_closed_when_a_batch_fails(outputs, monkeypatch):
    """Bug (issue 11): run_c2_study had no try/finally around its sessions."""
    from kit.backends.onnxruntime_backend import OrtSession
    from kit.studies import c2

    closed = []
    monkeypatch.setattr(OrtSession, "close", lambda self: closed.append(self), raising=False)

    def broken(*args, **kwargs):
        raise RuntimeError("preprocessing blew up")

    monkeypatch.setattr(c2, "preprocess_batch", broken)
    result = run_c2_study({**FAST, "batch_sizes": [2]})
    assert result.status == "error" and "preprocessing blew up" in result.errors[0]
    assert len(closed) == 2  # both replicas' sessions


def test_preprocess_real_image(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "photo.jpg"
    Image.fromarray(rng.integers(0, 255, (300, 400, 3), dtype=np.uint8)).save(path)
    arr = preprocess(path.read_bytes())
    assert arr.shape == (3, 224, 224) and arr.dtype == np.float32
    assert -2.2 < arr.min() < arr.max() < 2.7  # ImageNet normalisation range
    assert image_files(tmp_path) == [path]


def test_sample_images_ship_with_scikit_image():
    assert len(image_files("skimage")) >= 4


def test_empty_image_folder_is_a_clear_error(tmp_path):
    with pytest.raises(MissingResource, match="no images"):
        image_files(tmp_path)


def test_c2_efficiency_carries_the_indicative_flag():
    """A power window shorter than NVML resolves: the efficiency keeps its value, and the flag goes
    with it into the C2 rows, the scorecard (reason, column, shown value) and the tables."""

    rows = []
    for batch, seconds in ((2, 2.04), (4, 12.5)):
        m = measure(
            [lambda: None], batch // 2, MeasureConfig(warmup=0, min_duration_s=0, min_count=3)
        )
        m.power = {
            "method": "measured",
            "mean_w": 250.0,
            "sensor": "NVML nvmlDeviceGetPowerUsage 00000000:41:00.0",
            "sampler": "nvml",
            "duration_s": seconds,
            "window_resolved": seconds >= 10,
        }
        rows.append(c2_row(batch, batch // 2, m))
    short, long = rows
    assert short["efficiency"] == pytest.approx(short["throughput"] / 250.0)
    assert short["efficiency_indicative"] == (
        "indicative only: a 2.0 s power window, shorter than the sensor (nvml) resolves"
    )
    assert long["efficiency_indicative"] == ""
    result = RunResult(ResultKind.C2_STUDY, "c2", parameters={}, environment={})
    result.tables = result.tables.with_table("c2", rows)
    result.tables = result.tables.with_table(
        "published", published.c2_tables().reset_index().to_dict("records")
    )
    card = c2_rows([(Path("c2.json"), result)])
    eff = {c.batch_size: c for c in card if c.figure == "Energy efficiency"}
    assert (
        eff["2"].indicative == short["efficiency_indicative"]
        and short["efficiency_indicative"] in eff["2"].reason
    )
    assert eff["4"].indicative == "" and "indicative" not in eff["4"].reason
    latency = next(c for c in card if c.figure == "Latency" and c.batch_size == "2")
    assert latency.indicative == ""  # only power figures carry it
    shown = display_table(pd.DataFrame([c.to_dict() for c in card]))
    assert (
        shown[(shown.figure == "Energy efficiency") & (shown.batch_size == "2")]
        .measured.iloc[0]
        .endswith("(indicative)")
    )
    table = c2_tables(result)["Table 3. Energy efficiency (images/s/W)"]
    assert table.loc[2, "Measured (95 % CI)"].endswith(f"({short['efficiency_indicative']})")
    assert "indicative" not in table.loc[4, "Measured (95 % CI)"]


def test_c2_runs_on_a_one_ipu_c600_with_one_replica_as_a_deviation(outputs, monkeypatch):
    """Issue 29: replicas stayed 2 on a 1-IPU card, so every batch failed with 'at most 1'."""
    from kit.backends.ipu import backend as ipu_mod
    from tests.ipu_helpers import use_double

    use_double(monkeypatch)
    monkeypatch.setenv("KIT_POPRT_DOUBLE_NUM_DEVICES", "1")
    ipu_mod._AVAILABILITY.clear()
    result = run_c2_study(
        {**FAST, "batch_sizes": [2, 4], "backend": "ipu", "device": "ipu", "precision": "fp16"}
    )
    assert result.status == "ok", result.errors
    assert result.backend.more["replicas"] == 1 and result.backend.more["replicas_asked"] == 2
    assert "instead of the paper's 2" in result.backend.more["deviation"]
    assert any(n.startswith("Deviation from the C2 paper: 1 replica(s)") for n in result.notes)
    assert [r["micro_batch"] for r in result.tables.to_dict()["c2"]] == [2, 4]
    assert (
        result.backend.device_info.more["part"] == "c600"
        and result.backend.session.more["emulated"]
    )


def test_c2_keeps_two_replicas_where_there_are_two_ipus():
    from kit.studies.c2 import replicas_here

    cfg = C2Config(**FAST)
    assert replicas_here(cfg, {"kind": "ipu", "num_devices": 2}) == (cfg, None)
    assert replicas_here(cfg, {"kind": "cpu", "cores": 1}) == (cfg, None)
    with pytest.raises(InvalidParameter, match="PopRT sees 0 IPU"):
        replicas_here(cfg, {"kind": "ipu", "num_devices": 0})
