"""The ipu backend end to end through the poprt test double: one worker per session, ByteMLPerf's
settings applied, hardware checks, and every failure mode of the double caught with a clear
message."""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kit.backends import BACKENDS, BackendConfig, get_backend, require_backend, step_peaks
from kit.backends.ipu import EMULATED_NOTE, UNAVAILABLE, IpuBackend, IpuWorkerError, worker_process
from kit.backends.ipu import backend as ipu_mod
from kit.errors import BackendUnavailable, InvalidParameter, KitError
from kit.hardware.parts import MeasuredOn
from kit.measure.numerics import NumericDiff
from kit.measure.window import MeasureConfig
from kit.models.spec import ExportedModel, InputSpec, WeightsInfo
from tests.ipu_helpers import DOUBLE_STATE, TINY_INPUTS, tiny_model, tiny_reference, use_double
from tests.onnx_graphs import where_mask_export


@pytest.fixture
def with_double(monkeypatch, tmp_path):
    use_double(monkeypatch)
    monkeypatch.setenv(step_peaks.STORE_ENV, str(tmp_path / "step_peaks.json"))  # this test's own
    ipu_mod._AVAILABILITY.clear()
    yield monkeypatch
    ipu_mod._AVAILABILITY.clear()
    for session in list(ipu_mod._LIVE):
        session.close()


@pytest.fixture(scope="module")
def small_export():
    """Small exports of the published models, made once per module (the kit's keyed cache)."""
    from kit.models import export_model

    made: dict[str, ExportedModel] = {}

    def get(name: str) -> ExportedModel:
        if name not in made:
            made[name] = export_model(name, small=True, opset=IpuBackend.export_opset)
        return made[name]

    return get


def tiny_exported(tmp_path, name="tiny") -> ExportedModel:
    return ExportedModel(
        name=name,
        onnx_path=tiny_model(tmp_path / "tiny.onnx"),
        inputs=tuple(InputSpec.from_dict(s) for s in TINY_INPUTS),
        outputs=("y", "z"),
        weights=WeightsInfo("random", "seed 0"),
    )


def config(tmp_path, precision="fp16", **options) -> BackendConfig:
    return BackendConfig(
        precision=precision, device="ipu", options={"cache_dir": str(tmp_path / "popef"), **options}
    )


FAST = MeasureConfig(warmup=1, min_duration_s=0.05, min_count=5, clients=2)


def test_registered_under_ipu():
    assert BACKENDS.get("ipu") is IpuBackend
    assert get_backend("ipu").precisions == ("fp32", "fp16", "fp8")


def test_unavailable_gives_exactly_the_one_line_message(monkeypatch):
    use_double(monkeypatch, with_double=False)
    ipu_mod._AVAILABILITY.clear()
    assert IpuBackend().availability() == UNAVAILABLE
    with pytest.raises(BackendUnavailable) as err:
        require_backend("ipu")
    assert (
        str(err.value)
        == "IPU backend unavailable: PopRT not installed (needs the Poplar SDK; see README)"
    )
    monkeypatch.setenv("KIT_IPU_PYTHON", "/nonexistent/python3.8")
    ipu_mod._AVAILABILITY.clear()
    assert IpuBackend().availability() == UNAVAILABLE
    ipu_mod._AVAILABILITY.clear()


def test_device_info_names_the_exact_part_and_says_emulated(with_double):
    info = IpuBackend().device_info(BackendConfig(precision="fp16", device="ipu"))
    assert info["kind"] == "ipu" and info["ipu_version"] == "ipu21" and info["part"] == "c600"
    assert info["num_devices"] == 1 and info["emulated"] is True and info["peak"] is None
    assert info["name"].endswith("[not run on an IPU]") and info["note"] == EMULATED_NOTE
    on = MeasuredOn.from_backend({"device_info": info})
    assert (
        on.part == "c600" and on.emulated and not on.same_part("c600") and not on.same_part("gc2")
    )
    with_double.setenv("KIT_POPRT_DOUBLE_IPU_VERSION", "ipu2")
    assert (
        IpuBackend().device_info(BackendConfig(precision="fp16", device="ipu"))["part"] == "m2000"
    )


def test_a_bow_is_told_from_an_m2000_by_its_board(with_double):
    """Issue 29: both are ipu2 to PopRT; gc-info's board type tells them apart, else
    KIT_IPU_PART."""
    from kit.backends.ipu.backend import device_info_from

    with_double.setenv("KIT_POPRT_DOUBLE_IPU_VERSION", "ipu2")
    with_double.setenv("KIT_GCIPUINFO_DOUBLE_BOARD", "Bow-2000")
    info = IpuBackend().device_info(BackendConfig(precision="fp16", device="ipu"))
    assert (
        info["part"] == "bow"
        and info["board"] == "Bow-2000 Bow-2000"
        and info["name"].startswith("Graphcore Bow")
    )
    real = {"device": {"ipu_version": "ipu2", "num_devices": 4, "board": "Bow-2000"}}
    assert device_info_from(real, "fp16")["peak"]["gflops"] == 350e3
    assert (
        device_info_from({"device": {**real["device"], "board": "M2000"}}, "fp16")["peak"]["gflops"]
        == 250e3
    )
    with_double.delenv("KIT_IPU_PART", raising=False)
    undecided = device_info_from(
        {"device": {"ipu_version": "ipu2", "num_devices": 4, "board": None}}, "fp16"
    )
    assert undecided["part"] is None and undecided["peak"] is None
    assert "set KIT_IPU_PART=m2000 or bow" in undecided["peak_reason"]


def test_one_worker_per_session_runner_created_once(with_double, tmp_path):
    with_double.setenv("KIT_POPRT_DOUBLE_ATTACH_S", "0.2")
    model = tiny_exported(tmp_path)
    session = IpuBackend().load(model, config(tmp_path, "fp32"), 3)
    assert session.description["attach_seconds"] >= 0.2  # attach + load happened at load()
    pid = session.worker.proc.pid
    inputs = model.make_inputs(3, seed=5)
    started = time.perf_counter()
    for _ in range(10):
        outputs = session.run(inputs)
    assert time.perf_counter() - started < 0.2  # ten runs cost less than one attach: no new Runner
    assert session.worker.proc.pid == pid
    for got, want in zip(outputs, tiny_reference(inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    m = session.measure(inputs, 3, FAST)
    assert m.mode == "clients" and m.threads == 2 and all(len(t) >= 5 for t in m.calls)
    assert m.extra["emulated"] is True and m.extra["note"] == EMULATED_NOTE and m.power is None
    session.close()
    assert not session.worker.alive


def test_resnet50_runs_with_bytemlperf_settings(with_double, tmp_path, small_export):
    import onnxruntime as ort

    model = small_export("resnet50-torch-fp32")
    session = require_backend("ipu").load(model, config(tmp_path, "fp16"), 4)
    d = session.description
    assert d["emulated"] is True and d["part"] == "c600" and d["comparable"] is True
    opts = d["compiler_options"]
    # num_iotiles -> num_io_tiles
    assert opts["num_io_tiles"] == 64 and opts["batches_per_step"] == 128
    assert opts["stream_buffering_depth"] == 2 and opts["enable_prefetch_datastreams"] is True
    assert opts["available_memory_proportion"] == 0.6 and opts["rearrange_anchors_on_host"] is False
    assert "timeout_ns 10 ms" in d["runtime_config"]
    inputs = model.make_inputs(4, seed=1)
    ref = ort.InferenceSession(str(model.onnx_path), providers=["CPUExecutionProvider"]).run(
        None, inputs
    )
    diff = NumericDiff.between(ref, session.run(inputs))
    assert diff.nan_count == 0 and 0 < diff.max_abs < 0.05  # fp16 differs from fp32, not by much
    # I/O tiles need three requests in flight: one client still finishes (PopRT's 10 ms timeout
    # flushes)
    single = session.measure(inputs, 4, MeasureConfig(warmup=1, min_duration_s=0.0, min_count=3))
    assert single.latency.count == 3 and single.latency.mean_ms >= 10
    session.close()


def test_fp8_merges_bytemlperf_fp8_configs(with_double, tmp_path, small_export):
    session = IpuBackend().load(small_export("resnet50-torch-fp32"), config(tmp_path, "fp8"), 4)
    conv = session.description["converter_options"]
    assert conv["fp8_params"] == "F143,F143,-3,-3" and conv["precision"] == "fp8"
    # ByteMLPerf's skip name, resolved by module path to the node of the kit's export
    assert conv["fp8_skip_op_names"] == "/layer1/layer1.0/downsample/downsample.0/Conv"
    assert session.description["fp8_skip_op_names"] == {
        "/layer1/0/downsample/0/Conv": "/layer1/layer1.0/downsample/downsample.0/Conv"
    }
    assert session.description["fp8_op_types"] == ["Conv", "MatMul", "Gemm"]
    session.close()


def test_an_fp8_skip_name_of_no_node_is_an_error_naming_it(
    with_double, tmp_path, small_export, monkeypatch
):
    """Issue 29: a skip name that is no node of the kit's graph was a silent no-op."""
    from kit.backends.ipu import settings as ipu_settings

    real = ipu_settings.plan_for

    def wrong_name(model, precision):
        plan = real(model, precision)
        converter = {**plan.converter_options, "fp8_skip_op_names": "/layer9/0/downsample/0/Conv"}
        return ipu_settings.IpuRunPlan(**{**plan.__dict__, "converter_options": converter})

    monkeypatch.setattr(ipu_mod, "plan_for", wrong_name)
    with pytest.raises(
        InvalidParameter,
        match=r"invalid fp8_skip_op_names='/layer9/0/downsample/0/Conv': a node "
        r"of resnet50-torch-fp32's exported graph \(no node has it\); closest",
    ):
        IpuBackend().load(small_export("resnet50-torch-fp32"), config(tmp_path, "fp8"), 4)
    assert not (tmp_path / "popef").exists()  # refused before anything was converted


def test_a_precision_bytemlperf_never_ran_is_coded_where_the_session_says_so(
    with_double, tmp_path, small_export
):
    """The session writes each reason's code beside it (issue 53): the scorecard never reads the
    sentence."""
    session = IpuBackend().load(small_export("resnet50-torch-fp32"), config(tmp_path, "fp32"), 4)
    d = session.description
    session.close()
    assert d["not_comparable"][0].startswith("ByteMLPerf runs resnet50-torch-fp32 at ")
    assert d["not_comparable_codes"][0] == "plan_precision"


def test_a_pass_that_does_not_fire_on_the_kits_graph_makes_the_row_not_comparable(
    with_double, tmp_path, small_export
):
    """Issue 29: insert_attention_mask was passed to PopRT and nothing checked it fired. Issue 52:
    the double applies it to the export's mask chain; an export whose mask is built another way
    (Equal/ Where) gets no AttentionMask op: the row says so."""
    lost = where_mask_export(small_export("bert-torch-fp32"), tmp_path)
    session = IpuBackend().load(lost, config(tmp_path, "fp16"), 1)
    d = session.description
    check = d["passes"]["insert_attention_mask"]
    assert check["applied"] == "no" and check["evidence"] == "an AttentionMask op"
    assert d["comparable"] is False
    assert any(
        n.startswith("not comparable: ByteMLPerf's pass 'insert_attention_mask'")
        and "did not fire" in n
        for n in d["notes"]
    )
    session.close()
    # the scorecard reads the session's own reasons from this very description (issue 44, item 5)
    from kit.publish.comparability import session_differences

    reasons = session_differences(d)
    assert any(
        r.text.startswith("ByteMLPerf's pass 'insert_attention_mask'")
        and "did not fire" in r.text
        # the code the backend wrote beside it
        and r.code == "pass_not_fired"
        for r in reasons
    )
    assert "the session's settings are not ByteMLPerf's (see its notes)" not in [
        r.text for r in reasons
    ]
    assert len(d["not_comparable_codes"]) == len(d["not_comparable"])


# ---------------------------------------------------------------- the double's failure modes


def test_fp8_on_ipu2_is_refused_before_compiling(with_double, tmp_path):
    with_double.setenv("KIT_POPRT_DOUBLE_IPU_VERSION", "ipu2")
    with pytest.raises(InvalidParameter, match=r"fp8.*GC200.*fp8 needs a C600 \(ipu21\)"):
        IpuBackend().load(tiny_exported(tmp_path), config(tmp_path, "fp8"), 2)
    assert not (tmp_path / "popef").exists()  # nothing was compiled


def test_more_sessions_than_ipus_is_a_clear_error(with_double, tmp_path):
    model = tiny_exported(tmp_path)
    first = IpuBackend().load(model, config(tmp_path, "fp32"), 2)
    with pytest.raises(InvalidParameter, match=r"replicas.*at most 1: this machine has 1 IPU\(s\)"):
        IpuBackend().load(model, config(tmp_path, "fp32"), 2)
    first.close()
    # an M2000-like machine: two sessions fit
    with_double.setenv("KIT_POPRT_DOUBLE_NUM_DEVICES", "2")
    a, b = (IpuBackend().load(model, config(tmp_path, "fp32"), 2) for _ in range(2))
    assert a.worker.proc.pid != b.worker.proc.pid
    a.close()
    b.close()


def test_replicas_in_one_session_are_refused(with_double, tmp_path):
    session = IpuBackend().load(tiny_exported(tmp_path), config(tmp_path, "fp32"), 2)
    inputs = session_inputs = tiny_exported(tmp_path).make_inputs(2)
    with pytest.raises(InvalidParameter, match="replicas"):
        session.measure(inputs, 2, MeasureConfig(replicas=2))
    with pytest.raises(InvalidParameter, match="compiled for 2"):
        session.measure(session_inputs, 4, FAST)
    with pytest.raises(KitError, match="measure_window"):
        session.bind(inputs)
    session.close()


def test_device_busy_in_another_process_is_refused_after_the_wait(with_double, tmp_path):
    Path(DOUBLE_STATE).mkdir(exist_ok=True)
    with open(Path(DOUBLE_STATE) / "ipu0.lock", "a+") as held:  # another process holds the only IPU
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(
            IpuWorkerError, match="Failed to attach to any IPU device: all 1 device"
        ):
            IpuBackend().load(tiny_exported(tmp_path), config(tmp_path, "fp32"), 2)
        fcntl.flock(held, fcntl.LOCK_UN)
    IpuBackend().load(tiny_exported(tmp_path), config(tmp_path, "fp32"), 2).close()


def test_a_hung_request_times_out_with_a_clear_error(with_double, tmp_path):
    with_double.setenv("KIT_POPRT_DOUBLE_ATTACH_S", "5")
    with_double.setenv("KIT_IPU_LOAD_TIMEOUT_S", "0.5")
    with pytest.raises(IpuWorkerError, match=r"no reply to 'load' within 0 s .*it was stopped"):
        IpuBackend().load(tiny_exported(tmp_path), config(tmp_path, "fp32"), 2)


def test_a_dead_worker_reports_its_stderr_tail(with_double, tmp_path):
    crash = (
        "import sys; sys.stderr.write('poplar: fatal: IPU 0 link training failed\\n'); "
        "sys.exit(139)"
    )
    with_double.setenv("KIT_IPU_PYTHON", f'{sys.executable} -c "{crash}"')
    # poprt imports; the worker then crashes
    ipu_mod._AVAILABILITY[tuple(ipu_mod.interpreter())] = None
    with pytest.raises(IpuWorkerError, match=r"died .*exit code 139.*IPU 0 link training failed"):
        IpuBackend().load(tiny_exported(tmp_path), config(tmp_path, "fp32"), 2)


def test_killed_worker_mid_session_is_a_clear_error(with_double, tmp_path):
    model = tiny_exported(tmp_path)
    session = IpuBackend().load(model, config(tmp_path, "fp32"), 2)
    os.kill(session.worker.proc.pid, 9)
    session.worker.proc.wait()
    with pytest.raises(
        IpuWorkerError,
        match=r"killed before the request \(peak 0\.\d GB of .*: far from the memory limit",
    ):
        session.run(model.make_inputs(2))
    session.close()


def test_a_worker_killed_while_loading_is_reported_as_likely_out_of_memory_with_its_peak(
    with_double, tmp_path, monkeypatch
):
    """What the kernel's OOM killer does: SIGKILL, here in the middle of converting, with 0.3 GB
    held on a machine of 0.5 GB. The peak is the worker's VmHWM as last read while it loaded."""
    (tmp_path / "meminfo").write_text("MemTotal: 500000 kB\n")
    monkeypatch.setattr("kit.measure.memory.MEMINFO", tmp_path / "meminfo")
    monkeypatch.setattr("kit.measure.memory.CGROUP", tmp_path / "no-cgroup")
    oom = (
        "import os, runpy, signal, sys, time; main = runpy.run_path(sys.argv[1] + '/__main__.py'); "
        "serve = main['load_package'](); convert = sys.modules['kit_poprt_worker.convert']; "
        "convert.compile_popef = lambda job, env: (b'x' * (300 * 10**6), time.sleep(1.2), "
        "os.kill(os.getpid(), signal.SIGKILL)); sys.exit(serve.main(sys.argv[1:]))"
    )
    with_double.setenv("KIT_IPU_PYTHON", f'{sys.executable} -c "{oom}"')
    # poprt imports; the worker then dies
    ipu_mod._AVAILABILITY[tuple(ipu_mod.interpreter())] = None
    with pytest.raises(
        IpuWorkerError,
        match=r"killed during 'load' .*\(likely out of memory: peak 0\.[3-9] GB of 0\.5 GB\)\.",
    ):
        IpuBackend().load(tiny_exported(tmp_path), config(tmp_path, "fp32"), 2)
    # the next run of this model is checked against that peak instead of being killed unwarned
    with_double.setenv("KIT_IPU_PYTHON", sys.executable)
    session = IpuBackend().load(tiny_exported(tmp_path), config(tmp_path, "fp32"), 2)
    session.close()
    assert session.description["memory"]["steps"]["ipu-convert"]["need_checked_bytes"] >= 0.3e9


def test_docker_exec_reports_a_sigkill_inside_as_exit_137():
    assert worker_process.was_killed(-9, docker=False) and worker_process.was_killed(
        137, docker=True
    )
    assert not worker_process.was_killed(137, docker=False) and not worker_process.was_killed(
        1, docker=True
    )


def test_bad_compiler_option_fails_load_with_reason(with_double, tmp_path):
    with pytest.raises(IpuWorkerError, match="CompilerOptions.available_memory_proportion"):
        IpuBackend().load(
            tiny_exported(tmp_path),
            config(tmp_path, compiler_options={"available_memory_proportion": 1.5}),
            2,
        )
    with pytest.raises(IpuWorkerError, match="unknown compiler option 'replicas'"):
        IpuBackend().load(
            tiny_exported(tmp_path), config(tmp_path, compiler_options={"replicas": 2}), 2
        )


def test_power_window_is_read_in_the_worker_over_the_timed_calls(with_double, tmp_path):
    with_double.delenv("GCDA_MONITOR", raising=False)  # the kit sets it for the worker itself
    with_double.setenv("KIT_GCIPUINFO_DOUBLE_W", "120.0")
    model = tiny_exported(tmp_path)
    session = IpuBackend().load(model, config(tmp_path, "fp32"), 2)
    m = session.measure_window(
        model.make_inputs(2),
        2,
        MeasureConfig(warmup=3, min_duration_s=0.3, min_count=5, clients=2),
        power=True,
        # 3 readings at 20 Hz in 0.2 s were not sure on a loaded machine
        hz=200.0,
    )
    p = m.power
    assert (
        p["method"] == "measured"
        and p["mean_w"] == pytest.approx(120.0)
        and p["sampler"] == "gcipuinfo"
    )
    assert p["n_samples"] >= 3 and "GCDA_MONITOR='1'" in p["notes"][0]
    first, last = min(t[0][0] for t in m.calls), max(t[-1][1] for t in m.calls)
    assert p["window_start_ns"] == first and p["duration_s"] <= (last - first) / 1e9 + 0.05
    assert p["samples_processed"] == m.samples  # warm-up calls are not in the window
    session.close()


def test_power_sampler_keeps_no_reading_after_the_window_closes(monkeypatch):
    from kit.backends.ipu.poprt_worker.sensors import SensorLog

    monkeypatch.setattr(SensorLog, "_reader", lambda self, source: lambda: {"watts": 1.0})
    sampler = SensorLog({"hz": 1000.0, "sources": ["double"]})
    sampler.start()
    sampler.close()  # what the client that ends last does
    closed = sampler.readings[-1][0]
    # the thread's reading begun after the close
    sampler.readings.append((closed + 1, {"watts": 2.0}))
    out = sampler.stop()
    times = [t for t, _ in out["readings"]]
    assert times == sorted(times) and times[-1] == closed and len(times) >= 2


@pytest.mark.parametrize("boards", ["30.0,120.0", "N/A,120.0"])
def test_power_is_the_attached_cards_alone_on_a_server_of_two_c600s(with_double, tmp_path, boards):
    """Two C600 cards, one IPU each; another process holds IPU 0, so this session attaches IPU 1.
    Its power is IPU 1's board only: never both boards summed (150 W), nor missing because the idle
    board reads N/A."""
    with_double.delenv("GCDA_MONITOR", raising=False)
    with_double.setenv("KIT_POPRT_DOUBLE_NUM_DEVICES", "2")
    with_double.setenv("KIT_GCIPUINFO_DOUBLE_W", boards)
    model = tiny_exported(tmp_path)
    Path(DOUBLE_STATE).mkdir(exist_ok=True)
    with open(Path(DOUBLE_STATE) / "ipu0.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        session = IpuBackend().load(model, config(tmp_path, "fp32"), 2)
        try:
            assert session.description["ipu_device_id"] == 1
            m = session.measure_window(
                model.make_inputs(2),
                2,
                MeasureConfig(warmup=1, min_duration_s=0.2, min_count=5),
                power=True,
            )
        finally:
            session.close()
            fcntl.flock(held, fcntl.LOCK_UN)
    assert m.power["method"] == "measured", m.power
    assert m.power["mean_w"] == pytest.approx(120.0) and "IPU 1," in m.power["sensor"]


def test_an_ipu_window_says_it_stopped_on_the_minimums_with_rounds_cut_from_its_calls(
    with_double, tmp_path
):
    """kit.measure.window stops on a target interval; the worker cannot (Python 3.8, no kit), so the
    measurement says how it stopped, and still has rounds (hence an interval) cut from its call
    times."""
    model = tiny_exported(tmp_path)
    session = IpuBackend().load(model, config(tmp_path, "fp32"), 2)
    try:
        m = session.measure_window(
            model.make_inputs(2),
            2,
            MeasureConfig(warmup=1, min_duration_s=0.5, min_count=5, target_ci=0.05, min_rounds=5),
        )
    finally:
        session.close()
    assert (
        m.precision["target_ci"] == 0.05
        and "does not apply the target interval" in m.precision["stopped_by"]
    )
    assert len(m.rounds) >= 3 and every_thread_called_in_each_round(m.rounds)


def every_thread_called_in_each_round(marks: list[list[int]]) -> bool:
    starts = [[0] * len(marks[0]), *marks[:-1]]
    return all(e > s for a, b in zip(starts, marks, strict=True) for s, e in zip(a, b, strict=True))


def test_ipu_rounds_follow_the_timing_loops_rule():
    """Issue 52: the rounds cut from the worker's call times kept rounds in which a thread made no
    call (4 clients x 1 s calls at 0.2 s rounds: 63 "rounds" from 12 calls a thread, 30 identical);
    they are cut by the rule kit.measure.window's loop applies, so every round has a call of
    each."""
    second = 1_000_000_000
    calls = [
        [
            (k * 4 * second + c * second - 3 * second * bool(k), k * 4 * second + (c + 1) * second)
            for k in range(12)
        ]
        for c in range(4)
    ]  # each queued behind the others on the one IPU

    class Worker:
        def request(self, msg: dict, timeout_s: float) -> dict:
            return {"calls": calls, "power": None}

    session = ipu_mod.IpuSession(
        Worker(), 1, {"emulated": True, "device": {"num_devices": 1}}, None
    )
    ipu_mod._LIVE.discard(session)
    m = session.measure_window(
        {}, 1, MeasureConfig(min_duration_s=1.0, round_s=0.2, clients=4), power=False
    )
    assert 2 <= len(m.rounds) <= 12 and every_thread_called_in_each_round(m.rounds)
    assert len({tuple(r) for r in m.rounds}) == len(m.rounds)
