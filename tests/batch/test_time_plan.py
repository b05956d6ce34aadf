"""Issue 43, item 5: what a profile costs before it runs (`kit reproduce --plan`): each job's time
floor from its own parameters, by known answers on a GPU and a CPU kind."""

from __future__ import annotations

import pytest

from kit.backends import Placement
from kit.batch import time_plan
from kit.batch.profiles import jobs_for
from kit.search import candidates


@pytest.fixture
def no_tensorrt(monkeypatch):
    """The GPU's candidates as a host without TensorRT offers them (the planner reads this
    machine)."""
    monkeypatch.setattr(candidates, "tensorrt_python", lambda: False)
    monkeypatch.setattr("kit.hardware.kinds.CUDA.ort_providers", lambda: [])
    monkeypatch.setattr("kit.hardware.kinds.CUDA.planned_ort_providers", lambda: [])


def floor_of(profile: str, kind: str, job: str) -> time_plan.JobFloor:
    (found,) = time_plan.plan_profile(profile, kind, only={job})
    return found


def test_a_gpu_row_searches_every_published_batch_and_the_full_profile_waits_for_nvml(no_tensorrt):
    quick = floor_of("quick", "cuda", "resnet50-torch-fp32_FP16")
    # torch on CUDA: 4 quick torch candidates (today's fp16 eager, the fp16 graph and its 2 clients,
    # the compile; eager, bf16 and fp32 only where the fp16 graph fails) + ONNX Runtime's CUDA graph
    # (its eager ones only where it fails), at batch 4 and at batch 32
    assert (quick.windows, quick.searches, quick.probes, quick.compiles) == (2, 2, 10, 2)
    # the quick profile keeps its 1 s windows (power indicative)
    assert quick.window_floor_s == 2 * 1.0
    assert quick.window_limit_s == 2 * 5.0 and quick.probe_s == 10 * 1.0
    full = floor_of("full", "cuda", "resnet50-torch-fp32_FP16")
    assert full.window_floor_s == 2 * 10.0  # the full profile's 10 s minimum, NVML's window too
    # full: + max-autotune (no reduce-overhead with 2 clients: inductor's graphs are shared)
    assert full.window_limit_s == 2 * 120.0 and full.probes == 2 * 12 and full.compiles == 2 * 2


def test_a_gpu_run_planned_without_a_gpu_counts_the_candidates_a_gpu_install_brings(monkeypatch):
    """Planned on a laptop for a GPU host, the searches were counted as this machine offers them:
    no ONNX Runtime TensorRT provider, so two candidates a batch fewer than the host measures."""
    from kit.hardware import kinds

    monkeypatch.setattr(candidates, "tensorrt_python", lambda: False)
    monkeypatch.setattr(kinds.CUDA, "present", lambda: False)
    quick = floor_of("quick", "cuda", "resnet50-torch-fp32_FP16")
    assert (quick.searches, quick.probes) == (2, 2 * 6)  # + TensorRT fp16 at batches 4 and 32
    text = time_plan.plan_text([quick], "quick", "cuda")
    assert (
        "Candidates as a cuda install offers them (no cuda here): ONNX Runtime GPU providers "
        "TensorrtExecutionProvider;"
    ) in text
    monkeypatch.setattr(kinds.CUDA, "present", lambda: True)  # a GPU host counts its own
    monkeypatch.setattr(kinds.CUDA, "ort_providers", lambda: [])
    assert floor_of("quick", "cuda", "resnet50-torch-fp32_FP16").probes == 2 * 5


def test_the_c2_study_is_stretched_for_its_published_efficiency_on_a_gpu(no_tensorrt):
    c2 = floor_of("quick", "cuda", "c2_study")
    # 6 batch sizes, each raised from 2 s to 10 s
    assert (c2.windows, c2.window_floor_s) == (6, 60.0)
    assert floor_of("quick", "cpu", "c2_study").window_floor_s == 6 * 2.0  # RAPL states no minimum


def test_the_fp8_row_takes_its_fp16_siblings_probes_at_the_same_batches(no_tensorrt):
    floors = {f.job: f for f in time_plan.plan_profile("quick", "cuda")}
    # batches 4 and 32, as its FP16 row: only its own mapping (torch fp16) is measured again at each
    assert floors["resnet50-torch-fp32_FP8"].probes == 2
    # 45 is not 40
    assert floors["bert-torch-fp32_FP8"].probes == floors["bert-torch-fp32_FP16"].probes
    alone = time_plan.plan_profile("quick", "cuda", only={"resnet50-torch-fp32_FP8"})
    assert alone[0].probes == 10  # without its sibling in the batch it measures every candidate


def test_a_cpu_row_searches_once_at_its_search_batch():
    f = floor_of("quick", "cpu", "resnet50-torch-fp32_FP16")
    assert f.searches == 1 and f.windows == 2 and f.window_floor_s == 2 * 1.0


def test_the_quick_profile_keeps_its_windows_and_the_full_one_stretches_them():
    quick = next(j for j in jobs_for("quick", "cuda") if j.name == "resnet50-torch-fp32_FP16")
    full = next(j for j in jobs_for("full", "cuda") if j.name == "resnet50-torch-fp32_FP16")
    assert quick.parameters["stretch_for_power"] is False and full.parameters.get(
        "stretch_for_power", True
    )


def test_kit_reproduce_plan_prints_the_floors_and_runs_nothing(outputs, capsys, no_tensorrt):
    from kit.cli.main import main

    assert main(["reproduce", "--plan", "--hardware", "cuda", "--only", "resnet50"]) == 0
    text = capsys.readouterr().out
    assert (
        "resnet50-torch-fp32_FP16" in text
        and "resnet50-torch-fp32_FP8" in text
        and "clip" not in text
    )
    assert "1 ONNX export " in text and "probe s" in text
    assert not (outputs / "state.json").exists() and not (outputs / "runs").exists()


def test_the_server_floor_counts_its_fixed_batch_table(no_tensorrt):
    quick = floor_of("quick", "cuda", "server_scenario")
    # 2 policies (1 LoadGen window each at 2 s at least) + the table at batch 1, 2 and 4 (1 s each)
    assert (quick.windows, quick.window_floor_s) == (5, 2 * 2.0 + 3 * 1.0)
    full = floor_of("full", "cuda", "server_scenario")
    assert (full.windows, full.window_floor_s) == (8, 4 * 60.0 + 4 * 10.0)  # table at 1, 2, 4 and 8


def test_on_a_gpu_the_plan_says_what_a_run_will_take_labelled_an_estimate(no_tensorrt):
    floors = time_plan.plan_profile("quick", "cuda", only={"resnet50-torch-fp32_FP16"})
    cold, warm = time_plan.estimate(floors, "cuda")
    # 2 windows of 1 s, 10 probes of 1 s, 2 compiles of 30 s, 8 loads of 3 s, a notebook, an export
    assert cold == 2 + 10 + 60 + 24 + 16 + 5 and warm == 2 + 16 + 2 * 30 * 0.2
    text = time_plan.plan_text(floors, "quick", "cuda")
    assert text.splitlines()[-1] == (
        "ESTIMATE, not a measurement (per-item costs guessed from one run's time accounts "
        "on an H200, kit.batch.time_plan.GUESSES): a first run, nothing cached, about 1.9 min; "
        "a rerun on its caches (search decisions, exports and compiled kernels) about 0.5 min; "
        "the 1 model row in one warm kernel (after its first, a row's start taken as the share "
        "the warm kernel left on a 2-core Xeon, 3.5 of 9.5 s); each torch.compile candidate "
        "compiled in its own search here."
    )
    assert "ESTIMATE" not in time_plan.plan_text(
        time_plan.plan_profile("quick", "cpu", only={"summary"}), "quick", "cpu"
    )  # no guesses for a CPU: its floors only


def test_each_tensorrt_engine_a_search_builds_is_counted_as_a_build_not_a_load(monkeypatch):
    """ONNX Runtime's TensorRT provider builds an engine per search batch on an empty engine
    cache: each counted at the build guess instead of a 3 s load, and the estimate says so."""
    from kit.hardware import kinds

    monkeypatch.setattr(candidates, "tensorrt_python", lambda: False)
    monkeypatch.setattr(kinds.CUDA, "present", lambda: False)
    floors = time_plan.plan_profile("quick", "cuda", only={"resnet50-torch-fp32_FP16"})
    (row,) = floors
    assert (row.probes, row.compiles, row.engine_builds) == (12, 2, 2)  # batches 4 and 32
    cold, warm = time_plan.estimate(floors, "cuda")
    g = time_plan.GUESSES["cuda"]
    assert cold == 2 + 12 + 2 * 30 + 8 * 3 + 2 * g["engine_build_s"] + 16 + 5
    assert warm == 2 + 16 + 2 * 30 * 0.2  # the rerun reads the engine cache
    assert time_plan.estimate_text(floors, "cuda").endswith(
        "; the 2 TensorRT engine builds taken as 60 s each (never timed by this kit)."
    )
    table = time_plan.plan_text(floors, "quick", "cuda").splitlines()
    assert table[4].split()[-1] == "engines" and table[5].split()[-1] == "2"
    assert "GPU providers" not in time_plan.plan_text([], "quick", "cpu")  # none on a CPU
    assert Placement.of("tensorrt", "fp16", "cuda").builds_engine
    assert not Placement.of("onnxruntime", "fp16", "cuda").builds_engine


def test_a_bad_force_is_refused_in_plan_mode_too(outputs, capsys):
    """Issue 51: `make reproduce PLAN=1 FORCE=2` printed the plan and exited 0."""
    from kit.cli.main import main

    assert main(["reproduce", "--plan", "--force", "2", "--only", "resnet50"]) == 2
    err = capsys.readouterr().err
    assert "invalid FORCE='2'" in err and "0 (reuse" in err
    assert not (outputs / "runs").exists()


def test_the_estimate_counts_exports_made_side_by_side_as_rounds():
    floors = [time_plan.JobFloor(job=f"j{i}", model=f"m{i}") for i in range(5)]
    one_by_one, _ = time_plan.estimate(floors, "cuda")
    two_at_once, _ = time_plan.estimate(floors, "cuda", time_plan.SideBySide(2))
    five_at_once, _ = time_plan.estimate(floors, "cuda", time_plan.SideBySide(5))
    export_s = time_plan.GUESSES["cuda"]["export_s"]
    assert one_by_one - two_at_once == (5 - 3) * export_s  # 3 rounds: 2, 2, 1
    assert one_by_one - five_at_once == (5 - 1) * export_s


def test_model_rows_in_the_warm_kernel_pay_a_notebooks_start_once(no_tensorrt):
    rows = {"resnet50-torch-fp32_FP16", "bert-torch-fp32_FP16", "summary"}
    warm = time_plan.plan_profile("quick", "cuda", only=rows)  # auto: the cuda kind's warm kernel
    cold = time_plan.plan_profile("quick", "cuda", only=rows, warm="off")
    assert [f.warm for f in warm] == [True, True, False]  # the summary is not a model row
    assert not any(f.warm for f in cold)
    g = time_plan.GUESSES["cuda"]
    saved = g["notebook_s"] * (1 - g["warm_notebook"])  # the second row's start, once
    assert time_plan.estimate(cold, "cuda")[0] - time_plan.estimate(warm, "cuda")[0] == (
        pytest.approx(saved)
    )
    assert time_plan.estimate(cold, "cuda")[1] - time_plan.estimate(warm, "cuda")[1] == (
        pytest.approx(saved)
    )
    assert "the 2 model rows in one warm kernel" in time_plan.plan_text(warm, "quick", "cuda")
    assert "; every notebook in a kernel of its own;" in time_plan.plan_text(cold, "quick", "cuda")


def test_compiles_made_side_by_side_count_as_rounds_then_each_search_reads_its_graph(no_tensorrt):
    """Issue 50: the quick run's 15 torch.compile candidates, compiled 4 at a time before the first
    job (kit.search.ahead), then each search's compile read from inductor's cache."""
    floors = time_plan.plan_profile("quick", "cuda")
    assert sum(f.compiles for f in floors) == 15
    g = time_plan.GUESSES["cuda"]
    alone, _ = time_plan.estimate(floors, "cuda", time_plan.SideBySide(12, 0))
    ahead, warm = time_plan.estimate(floors, "cuda", time_plan.SideBySide(12, 4))
    assert alone - ahead == pytest.approx(
        15 * g["compile_s"] - (4 * g["compile_s"] + 15 * g["compile_s"] * g["cached_compile"])
    )  # 450 s of compiles become 4 rounds of 30 s and 15 cached compiles of 6 s
    assert warm == time_plan.estimate(floors, "cuda", time_plan.SideBySide(12, 0))[1]
    one_at_a_time, _ = time_plan.estimate(floors, "cuda", time_plan.SideBySide(12, 1))
    assert one_at_a_time == alone  # one at a time: each search compiles its own
    text = time_plan.estimate_text(floors, "cuda", time_plan.SideBySide(12, 4, "there"))
    assert text.endswith(
        "the 15 torch.compile candidates compiled 4 at a time before the first job there."
    )


def test_a_gpu_run_planned_without_a_gpu_is_planned_on_a_host_like_the_guesses(
    no_tensorrt, monkeypatch, tmp_path
):
    """`kit reproduce --plan --hardware cuda` on a laptop: the exports and compiles side by side as
    the 16-core, 128 GB host the per-item guesses come from would make them, and said so."""
    from kit.batch.profiles import jobs_for
    from kit.hardware import kinds

    monkeypatch.setattr(type(kinds.get("cuda")), "present", lambda self: False)
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))  # no cached decision leaves a compile out

    side = time_plan.side_by_side(jobs_for("quick", "cuda"), "cuda")
    # 12 exports (the largest, widedeep, 5.8 GB: 17 fit in 0.8 x 128 GB); 16 cores / 4 per compile
    assert (side.exports, side.compiles) == (12, 4)
    assert side.where == "on a host like the guesses' (16 cores, 128 GB)"
    here = time_plan.side_by_side(jobs_for("quick", "cpu"), "cpu")
    assert here.where == "here" and here.compiles == 0  # no torch.compile candidate on a CPU
