"""Graphcore IPU through PopRT, driven out of process by one long-lived worker per session.

PopRT lives in a Python 3.8 environment (Poplar SDK or the graphcorecn/poprt image), the kit in
3.11, so every PopRT call happens in the worker (`poprt_worker/`, driven through
`worker_process.IpuWorker`). Each IpuSession starts its worker once: the Runner attaches the IPU
and loads the PopEF once, then serves run / measure requests until the session is closed.
"""

from __future__ import annotations

import os
import subprocess
import weakref
from pathlib import Path

import numpy as np

from kit.backends import step_peaks
from kit.backends.base import Backend, BackendConfig, Session
from kit.backends.ipu.graph import (
    check_passes,
    evidence_passes,
    graph_node_names,
    keeps_samples_apart,
    pass_differences,
    resolve_fp8_skips,
)
from kit.backends.ipu.pack import check_packing, pack_measurement
from kit.backends.ipu.settings import IpuRunPlan, plan_for
from kit.backends.ipu.verdict import NOT_COMPARABLE, mark_not_comparable
from kit.backends.ipu.worker_process import UNAVAILABLE, IpuWorker, interpreter, request_timeout_s
from kit.backends.options import IpuOptions
from kit.errors import BackendUnavailable, InvalidParameter, KitError
from kit.hardware import parts
from kit.measure.memory import GB, SKIP_CHECK_ENV, conversion_budget
from kit.measure.power.ipu import enable_ipu_monitoring, summary_from_worker
from kit.measure.power.summary import PowerSummary
from kit.measure.window import BatchMeasurement, MeasureConfig, marks_from_times
from kit.models.spec import ExportedModel
from kit.paths import cache_dir
from kit.results.reasons import DifferenceCode

EMULATED_NOTE = "not run on an IPU: PopRT test double over ONNX Runtime"
EMULATED_LABEL = "[not run on an IPU]"
#: PopRT's Converter first brings a graph to its `convert_version` (11 unless given, and ByteMLPerf
#: never gives it); ONNX has no way down from opset 17's LayerNormalization, Identity-16, Shape-15
#: or Add-14, so the graphs the IPU compiles are exported at 11, as ByteMLPerf's tools exported
#: them.
CONVERT_VERSION = 11
#: How an IPU window stopped, for the report: kit.measure.window's target-interval rule needs the
#: kit's statistics, which the Python 3.8 worker cannot import, so its clients stop on the minimums.
IPU_STOP = (
    "minimum duration and count (or the maximum duration) in the PopRT worker, which does not "
    "apply the target interval; rounds cut from its call times afterwards by the timing loop's rule"
)
_AVAILABILITY: dict[tuple[str, ...], str | None] = {}
_LIVE: weakref.WeakSet = weakref.WeakSet()  # sessions holding an IPU in this process


def check_request(device: dict, precision: str, sessions: int) -> None:
    """Before compiling: the IPU can run `precision`, and there is a free IPU for this session."""
    if "error" in device:
        raise BackendUnavailable(
            f"IPU backend unavailable: PopRT reads no device ({device['error']})"
        )
    count, version = int(device.get("num_devices", 0)), device.get("ipu_version")
    named = part_name(device)
    if precision == "fp8" and version != parts.PARTS["c600"].ipu_version:
        raise InvalidParameter(
            "precision",
            precision,
            f"fp16 or fp32 on this {named}: fp8 needs a C600 ({parts.PARTS['c600'].ipu_version})",
        )
    if sessions > count:
        raise InvalidParameter(
            "replicas",
            sessions,
            f"at most {count}: this machine has {count} IPU(s) "
            f"({named}) and each session's Runner holds one IPU (a C600 card has one); "
            "use clients to share one IPU",
        )


class IpuSession(Session):
    """A model compiled for one batch size, its Runner alive in a worker until close()."""

    def __init__(self, worker: IpuWorker, batch_size: int, description: dict, pack: dict | None):
        self.worker, self.batch_size, self.description, self.pack = (
            worker,
            batch_size,
            description,
            pack,
        )
        # pack mode without a packing-aware attention: run() sends samples one per pack
        self.isolate = bool(pack) and not keeps_samples_apart(description.get("passes") or {})
        _LIVE.add(self)

    def run(self, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Outputs for a batch; in pack mode its samples go to the PackRunner one by one (each alone
        in its pack where the model's attention is not packing-aware, so the outputs stay right)."""
        return self.run_packed(inputs, self.isolate) if self.pack else self._run(inputs)

    def _run(self, inputs: dict[str, np.ndarray], isolate: bool = False) -> list[np.ndarray]:
        return self.worker.request(
            {"op": "run", "inputs": inputs, "isolate": isolate}, request_timeout_s()
        )

    def run_packed(self, inputs: dict[str, np.ndarray], isolate: bool) -> list[np.ndarray]:
        return self._run(inputs, isolate)

    def bind(self, inputs: dict[str, np.ndarray]):
        raise KitError(
            "ipu sessions are timed inside the PopRT worker process; use measure_window()"
        )

    def measure(
        self, inputs: dict[str, np.ndarray], batch_size: int, cfg: MeasureConfig
    ) -> BatchMeasurement:
        return self.measure_window(inputs, batch_size, cfg, power=False)

    def measure_window(
        self,
        inputs: dict[str, np.ndarray],
        batch_size: int,
        cfg: MeasureConfig,
        sampler=None,
        *,
        power: bool | None = None,
        devices: tuple[int, ...] | None = None,
        hz: float = 20.0,
    ) -> BatchMeasurement:
        """One timed window in the worker: warm-up first, then the client threads' calls, with the
        IPU power read over exactly those calls (`.power`, a PowerSummary dict, when `power`).

        The sensor is read in the worker (the SDK's gcipuinfo lives there), so a study's host-side
        `sampler` only says whether power was asked for: power is read unless it is None or was
        switched off (kit.measure.power.sampler_for(..., enabled=False)).
        """
        if power is None:
            power = sampler is not None and not getattr(sampler, "switched_off", False)
        if cfg.replicas > 1:
            raise InvalidParameter(
                "replicas",
                cfg.replicas,
                "1 per session: load one IpuSession per IPU "
                "(PopRT has no replication); clients share one session",
            )
        if batch_size != self.batch_size:
            raise InvalidParameter(
                "batch_size", batch_size, f"this session was compiled for {self.batch_size}"
            )
        devices = devices or self.attached_ipu()
        msg = {
            "op": "measure",
            "inputs": inputs,
            "warmup": cfg.warmup,
            "clients": cfg.clients,
            "min_duration_s": cfg.min_duration_s,
            "min_count": cfg.min_count,
            "max_duration_s": cfg.max_duration_s,
            "power": {"hz": hz, "devices": list(devices) if devices else None} if power else None,
        }
        out = self.worker.request(msg, request_timeout_s() + cfg.max_duration_s)
        calls = [[(int(s), int(e)) for s, e in thread] for thread in out["calls"]]
        if self.pack:
            m = pack_measurement(calls, self.pack)
            m.extra["pack_lengths"] = out.get("pack_lengths")
            if out.get("pack_fill"):  # inputs benchmark_pack's ones would index out of range
                m.extra["pack_fill"] = out["pack_fill"]
        else:
            m = BatchMeasurement(
                batch_size=batch_size,
                mode="clients" if len(calls) > 1 else "single",
                threads=len(calls),
                calls=calls,
            )
        m = BatchMeasurement(
            batch_size=m.batch_size,
            mode=m.mode,
            threads=m.threads,
            calls=m.calls,
            extra=m.extra,
            rounds=marks_from_times(m.calls, cfg),
            precision={"target_ci": cfg.target_ci, "stopped_by": IPU_STOP},
        )
        emulated = self.description.get("emulated", False)
        m.extra.update(
            backend="ipu",
            emulated=emulated,
            poprt_version=self.description.get("poprt_version"),
            timer="time.perf_counter_ns in the PopRT worker",
            window="warm-up outside; power read from just before the first call to just after the "
            "last",
        )
        if emulated:
            m.extra["note"] = EMULATED_NOTE
        if power:
            start = min(t[0][0] for t in calls if t)
            m.power = (
                self.power_summary(out["power"], start, devices)
                .with_samples(m.samples, m.throughput)
                .to_dict()
            )
        return m

    def attached_ipu(self) -> tuple[int, ...] | None:
        """The IPU this session's Runner attached, as the worker reported it (None: unknown)."""
        found = self.description.get("ipu_device_id")
        return None if found is None else (int(found),)

    def power_summary(
        self, raw: dict | None, start_ns: int, devices: tuple[int, ...] | None
    ) -> PowerSummary:
        """The attached card's power only: on a machine of several IPUs whose attached one is
        unknown, no figure (every board's sum, or an idle board's N/A, would stand for this
        run's)."""
        count = int((self.description.get("device") or {}).get("num_devices") or 1)
        if devices is None and count > 1 and raw is not None:
            return PowerSummary.unavailable(
                f"this machine has {count} IPUs and the worker could not tell which "
                "one this session's Runner attached, so no board's power is its own"
            )
        return summary_from_worker(raw, start_ns, devices)

    def close(self) -> None:
        _LIVE.discard(self)
        self.worker.close()


class IpuBackend(Backend):
    name = "ipu"
    options_type = IpuOptions
    precisions = ("fp32", "fp16", "fp8")
    export_opset = CONVERT_VERSION

    def availability(self) -> str | None:
        cmd = tuple(interpreter())
        if cmd not in _AVAILABILITY:
            try:
                proc = subprocess.run(
                    [*cmd, "-c", "import poprt"], capture_output=True, timeout=120
                )
                _AVAILABILITY[cmd] = None if proc.returncode == 0 else UNAVAILABLE
            except (OSError, subprocess.TimeoutExpired):
                _AVAILABILITY[cmd] = UNAVAILABLE
        return _AVAILABILITY[cmd]

    def require(self) -> None:
        reason = self.availability()
        if reason:
            raise BackendUnavailable(reason)

    def probe(self) -> dict:
        """PopRT version, worker Python, device (ipu_version, num_devices), test-double flag."""
        self.require()
        worker = IpuWorker()
        try:
            return worker.probe()
        finally:
            worker.close()

    def device_info(self, config: BackendConfig) -> dict:
        env = self.probe()
        return device_info_from(env, config.precision)

    def load(self, model: ExportedModel, config: BackendConfig, batch_size: int) -> IpuSession:
        """Check the hardware, compile (PopEF cached on disk), start the Runner once."""
        self.check_precision(config.precision)
        self.require()
        options = config.options_as(IpuOptions)
        plan = plan_for(model.name, config.precision) if options.published_settings else None
        pack = plan.pack if plan and plan.pack and not plan.missing_passes else None
        compiled_batch = pack["batch_size"] if pack else batch_size

        env = dict(os.environ)
        enable_ipu_monitoring(env)  # sensors read N/A unless the process using the IPU monitors
        worker = IpuWorker(env)
        memory = ConversionMemory(model, config.precision, compiled_batch)
        try:
            probe = worker.probe()
            check_request(probe.get("device", {}), config.precision, len(_LIVE) + 1)
            memory.emulated = bool(probe.get("test_double", False))
            job = {
                **self.job(model, config, compiled_batch, plan, pack),
                "memory_needs": memory.needs(),
            }
            info = worker.request(job, request_timeout_s("load"))
        except BaseException:
            if worker.killed and worker.peak_gb:
                memory.record_kill(worker.peak_gb * GB)
            worker.kill()
            raise
        description = self.describe(model, config, batch_size, info, plan, pack)
        description["memory"] = memory.record(
            info.get("memory") or {}, info.get("env", {}).get("poprt_version")
        )
        if description["memory"].get("over_budget"):
            description.setdefault("notes", []).append(description["memory"]["verdict"])
        session = IpuSession(worker, batch_size, description, pack)
        if pack and options.check_packing:
            try:
                check_packing(session, model, config.precision)
            except BaseException:
                session.close()
                raise
        return session

    def job(
        self,
        model: ExportedModel,
        config: BackendConfig,
        batch_size: int,
        plan: IpuRunPlan | None,
        pack: dict | None,
    ) -> dict:
        opts = config.options_as(IpuOptions)
        converter = dict(plan.converter_options if plan else {}) | dict(
            opts.converter_options or {}
        )
        compiler = dict(plan.compiler_options if plan else {}) | dict(opts.compiler_options or {})
        if config.precision == "fp8" and converter.get("fp8_skip_op_names"):
            resolved = resolve_fp8_skips(
                converter["fp8_skip_op_names"], graph_node_names(str(model.onnx_path)), model.name
            )
            converter["fp8_skip_op_names"] = ",".join(resolved.values())
        pack_inputs = None
        if pack:
            pack_inputs = dict(pack["model_inputs"])
            if pack_inputs.get("add") != "position_ids":
                pack_inputs = {}
        return {
            "op": "load",
            "onnx_path": str(Path(model.onnx_path).resolve()),
            "precision": config.precision,
            "batch_size": batch_size,
            "inputs": [spec.to_dict() for spec in model.inputs],
            "converter_options": converter,
            "compiler_options": compiler,
            "pack": pack,
            "evidence_passes": evidence_passes(converter.get("used_passes", [])),
            "pack_inputs": pack_inputs,
            "cache_dir": str(
                Path(cache_dir() / "popef" if opts.cache_dir is None else opts.cache_dir).resolve()
            ),
        }

    def describe(
        self,
        model: ExportedModel,
        config: BackendConfig,
        batch_size: int,
        info: dict,
        plan: IpuRunPlan | None,
        pack: dict | None,
    ) -> dict:
        env = info.get("env", {})
        emulated = bool(env.get("test_double", False))
        device = device_info_from(env, config.precision)
        d = {
            "backend": self.name,
            "runtime": "PopRT",
            "precision": config.precision,
            "batch_size": batch_size,
            "compiled_batch_size": int(info.get("compiled_batch_size", batch_size)),
            "poprt_version": env.get("poprt_version"),
            "worker_python": env.get("python"),
            "interpreter": " ".join(interpreter()),
            "device": env.get("device"),
            "part": device["part"],
            "device_name": device["name"],
            "popef": Path(info.get("popef", "")).name,
            "compile_seconds": info.get("compile_seconds"),
            "popef_cached": info.get("popef_cached"),
            "attach_seconds": info.get("attach_seconds"),
            "model_opset": model.opset,
            "ipu_device_id": info.get("device_id"),
            "convert_version": info.get("converter_options", {}).get(
                "convert_version", CONVERT_VERSION
            ),
            "converter_options": {
                k: v for k, v in info.get("converter_options", {}).items() if k != "input_shape"
            },
            "input_shape": info.get("converter_options", {}).get("input_shape"),
            "compiler_options": info.get("compiler_options"),
            "runtime_config": "PackRunnerConfig"
            if pack
            else "RuntimeConfig (PopRT defaults: timeout_ns 10 ms)",
            "emulated": emulated,
            "worker": "one long-lived PopRT worker per session (Runner created once)",
        }
        if config.precision == "fp8":
            d["fp8_op_types"] = info.get("fp8_op_types", [])
        if plan is None:
            d["settings"] = "no ByteMLPerf settings for this model: PopRT's defaults"
            d["comparable"] = True
        else:
            d["settings"] = plan.to_dict()
            d["comparable"] = plan.comparable
            d["notes"] = [n for n in plan.notes if not n.startswith(NOT_COMPARABLE)]
            for note in plan.notes:
                if note.startswith(NOT_COMPARABLE):
                    # plan_for's only one
                    mark_not_comparable(d, note, DifferenceCode.PLAN_PRECISION)
            if plan.missing_passes:
                d["missing_passes"] = list(plan.missing_passes)
            self.check_settings(d, plan, info)
            if plan.pack and not pack:
                d["notes"].append(
                    f"ByteMLPerf packs this model; without {', '.join(plan.missing_passes)} the "
                    f"kit runs the padded model at batch {batch_size} instead (packing without the "
                    "pass would mix samples' attention)"
                )
        if pack:
            d["pack_output_buffers"] = info.get("pack_output_calls")
            d["pack_mode"] = (
                f"PackRunner (first_fit, max_valid_num {pack['max_valid_num']}, timeout "
                f"{pack['timeout_microseconds']} us) on unpadded samples, as ByteMLPerf"
            )
        if emulated:
            d["note"] = EMULATED_NOTE
        return d

    @staticmethod
    def check_settings(d: dict, plan: IpuRunPlan, info: dict) -> None:
        """ByteMLPerf's settings against the kit's graph: the fp8 skip names as resolved, and each
        pass judged by the op types it should leave; a pass that did not fire makes the row not
        comparable, named."""
        published = plan.converter_options.get("fp8_skip_op_names")
        if plan.precision == "fp8" and published:
            used = info.get("converter_options", {}).get("fp8_skip_op_names", "")
            d["fp8_skip_op_names"] = dict(
                zip(
                    [n.strip() for n in published.split(",") if n.strip()],
                    used.split(","),
                    strict=False,
                )
            )
        graph = info.get("graph") or {}
        passes = check_passes(
            plan.converter_options.get("used_passes", []),
            graph.get("op_types_after"),
            graph.get("op_types_without"),
        )
        if passes:
            d["passes"] = passes
            for reason in pass_differences(passes):
                mark_not_comparable(d, reason.text, DifferenceCode(reason.code))


class ConversionMemory:
    """The PopRT conversion's and compilation's memory: the needs known from earlier measurements on
    this host (kit.backends.step_peaks), sent to the worker to check before each step, and
    afterwards each step's measured peak, recorded and set against the 3 x ONNX file + 2 GB
    budget."""

    STEPS = ("ipu-convert", "ipu-compile")

    def __init__(self, model: ExportedModel, precision: str, batch_size: int):
        self.model, self.precision, self.batch_size = model, precision, batch_size
        self.model_bytes = Path(model.onnx_path).stat().st_size
        self.emulated = self.skipped = False

    def key(self, step: str) -> str:
        """Peaks of the test double never stand for PopRT's."""
        return f"{step} (test double)" if self.emulated else step

    def needs(self) -> dict:
        self.skipped = os.environ.get(SKIP_CHECK_ENV) == "1"
        if self.skipped:
            return {}
        return {
            step: found
            for step in self.STEPS
            if (found := step_peaks.need(self.key(step), self.model.name, self.model_bytes))
            is not None
        }

    def record(self, measured: dict, poprt_version: str | None) -> dict:
        budget = conversion_budget(self.model_bytes)
        out = {
            "model_bytes": self.model_bytes,
            "budget_bytes": budget,
            "budget": "3 x the ONNX file + 2 GB",
            **measured,
        }
        steps = {s: f for s, f in (measured.get("steps") or {}).items() if f.get("peak_rss_bytes")}
        if not steps:
            out["verdict"] = (
                f"not measured: {measured.get('status', 'the worker could not read its VmHWM')}"
            )
            return out
        context = f"PopRT {poprt_version}, {self.precision}, batch {self.batch_size}"
        for step, figures in steps.items():
            peak = int(figures["peak_rss_bytes"])
            step_peaks.record(
                self.key(step),
                step_peaks.Observation(
                    self.model.name,
                    self.model_bytes,
                    peak,
                    peak - int(figures.get("rss_before_bytes") or 0),
                    context,
                ),
            )
            if figures.get("need_checked_bytes") is None:
                figures["check"] = "not checked before the step: " + (
                    f"{SKIP_CHECK_ENV}=1"
                    if self.skipped
                    else "MemAvailable unreadable"
                    if figures.get("available_before_bytes") is None
                    else "no measurement of this model or one at least half its size on this host"
                )
        over = [s for s, f in steps.items() if f["peak_rss_bytes"] > budget]
        out["over_budget"] = over
        peaks = ", ".join(f"{s} {f['peak_rss_bytes'] / GB:.2f} GB" for s, f in steps.items())
        out["verdict"] = (
            f"PopRT memory over the {budget / GB:.1f} GB budget (3 x file + 2 GB): {peaks}"
            if over
            else f"PopRT memory within the {budget / GB:.1f} GB budget (3 x file + 2 GB): {peaks}"
        )
        if self.emulated:
            out["verdict"] += f" [{EMULATED_NOTE}]"
        return out

    def record_kill(self, peak_bytes: float) -> None:
        """A worker killed while loading: its last peak read (a lower bound) is what the next run of
        this model is checked against, under the conversion step (where most of a load's memory
        goes)."""
        step_peaks.record(
            self.key("ipu-convert"),
            step_peaks.Observation(
                self.model.name,
                self.model_bytes,
                int(peak_bytes),
                int(peak_bytes),
                f"worker killed while loading ({self.precision}, batch {self.batch_size}): at "
                "least this peak",
            ),
        )


def part_name(device: dict) -> str:
    """The exact part's name, or what is known of an IPU whose part is undecided."""
    version = device.get("ipu_version")
    part = parts.part_for_ipu_version(version, device.get("board"))
    if part:
        return part.name
    if version == parts.PARTS["m2000"].ipu_version:
        board = (
            f"the board says {device['board']!r}"
            if device.get("board")
            else "the board type is unreadable"
        )
        return (
            f"GC200-class IPU ({version}: an M2000 or a Bow; {board}, set {parts.PART_ENV}=m2000 "
            "or bow)"
        )
    return f"unknown IPU ({version})"


def device_info_from(env: dict, precision: str) -> dict:
    """device_info for what the worker reported: kind, name, ipu_version, exact part, emulated."""
    device = env.get("device", {})
    version = device.get("ipu_version")
    part = parts.part_for_ipu_version(version, device.get("board"))
    emulated = bool(env.get("test_double", False))
    name = part_name(device)
    info = {
        "kind": "ipu",
        "name": f"{name} {EMULATED_LABEL}" if emulated else name,
        "ipu_version": version,
        "part": part.key if part else None,
        "emulated": emulated,
        "board": device.get("board"),
        "num_devices": device.get("num_devices"),
        "poprt_version": env.get("poprt_version"),
    }
    if "error" in device:
        info["device_error"] = device["error"]
    gflops = part.peaks_gflops.get(precision) if part else None
    if emulated:
        info.update(peak=None, note=EMULATED_NOTE)
    elif gflops and part:
        info["peak"] = {
            "gflops": gflops,
            "precision": precision,
            "method": f"Graphcore's published peak for one {part.name}",
        }
    elif part is None:
        info["peak"] = None
        info["peak_reason"] = f"no peak: the exact part is unknown ({name})"
    return info
