"""torch.compile candidates compiled ahead of the jobs that probe them.

On a GPU a row's search compiles its torch.compile candidate at every published batch, one job
after another, tens of seconds each (15 of them in a quick run). Most of a compile is one Python
thread (dynamo, AOTAutograd, inductor's lowering), so a host with many cores can make several at
once. Before a batch's first timed job, each torch.compile candidate its searches will probe
(`planned_compiles`) is compiled once, several side by side (kit.batch.prepare), each in a child
process of its own that loads it exactly as the search's probe does (`compile_one`). What they
leave is inductor's own on-disk caches under outputs/cache/torch-compile/ (its FX graph cache and
the kernels: Triton's on a GPU, C++ on a CPU; kit.backends.compile_cache), keyed by inductor on the
graph, the input shapes, its configuration and the software and device; the probe's own compile
then finds the graph there and loads it (its session records the cache hit, `compile_cache`)
instead of compiling it. (AOTAutograd's own cache is bypassed with frozen weights; on a CPU,
mkldnn-packed weights keep the graph out of the FX graph cache too, so a CPU's search compiles the
graph again and finds only its kernels: on this 2-core Xeon the small resnet50 took 41 s cold and 12
s after a compile of it.) Nothing is timed meanwhile, and what the job times is the code it loaded:
a cached graph is the graph the compile would have made.

Left out on purpose:
- max-autotune: the kernels its timings chose are baked into the cached graph, and compiles side by
  side would have timed them against each other on one device. The default and reduce-overhead
  modes time one thing while compiling: inductor's pad_mm pass compares a matrix multiply padded
  and not, on the device, and keeps its choice; side by side, both sides of that comparison run
  under the same contention (a relative choice, not an absolute timing);
- the children keep no autotuning result (inductor's autotune_local_cache off; it is not part of
  the graph's cache key): a kernel with several launch configurations is tuned by the job itself,
  alone on the device;
- a second request for the same graph (a candidate that differs only in its clients);
- a candidate whose row has a cached decision (no search will probe it) or whose export is not
  cached (the job exports it first, and reports why where that fails).

Run as `python -m kit.search.ahead REQUEST_JSON`: one compile, one JSON line on stdout.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from kit.backends import Placement, require_backend
from kit.backends.options import GpuOptions
from kit.errors import error_line
from kit.measure.memory import own_peak_rss_bytes
from kit.models.requests import ExportRequest
from kit.search import cache
from kit.search.planning import SearchSettings, planned_probes
from kit.search.probe import ProbeStatus

#: torch.compile modes that time nothing while compiling (None: torch's default mode)
AHEAD_MODES = (None, "default", "reduce-overhead")


@dataclass(frozen=True, kw_only=True)
class CompileRequest:
    """One torch.compile candidate a search will probe: the export it builds from, what runs where,
    and the batch its static shapes are compiled for."""

    export: ExportRequest
    placement: Placement
    batch: int

    @property
    def label(self) -> str:
        return f"{self.export.model} {self.placement.label} batch {self.batch}"

    def to_dict(self) -> dict:
        return {
            "export": self.export.to_dict(),
            "placement": self.placement.plan(),
            "batch": self.batch,
        }

    @classmethod
    def from_dict(cls, d: dict) -> CompileRequest:
        return cls(
            export=ExportRequest(**d["export"]),
            placement=Placement.from_plan(d["placement"]),
            batch=int(d["batch"]),
        )


def compiles_ahead(placement: Placement) -> bool:
    """Whether a candidate is compiled ahead: torch.compile in a mode that times nothing while it
    compiles."""
    options = placement.options
    return options.compiles and getattr(options, "compile_mode", None) in AHEAD_MODES


def one_graph(placement: Placement) -> Placement:
    """The placement with what does not change the compiled graph left out (its clients: each
    client calls the one compiled module)."""
    options = placement.options
    if isinstance(options, GpuOptions):
        options = replace(options, clients=None)
    return replace(placement, options=options)


def planned_compiles(
    export: ExportRequest,
    published: str,
    kind: str,
    settings: SearchSettings,
    batches: Iterable[int],
) -> list[CompileRequest]:
    """The torch.compile candidates the row's searches at `batches` will probe (as
    kit.search.planning plans them) and compile ahead, where no cached decision serves the batch."""
    ahead = list(
        dict.fromkeys(
            one_graph(p.placement)
            for p in planned_probes(export.model, published, kind, settings.depth)
            if p.status == ProbeStatus.PENDING and compiles_ahead(p.placement)
        )
    )
    if not ahead:
        return []
    return [
        CompileRequest(export=export, placement=placement, batch=batch)
        for batch in batches
        if settings.force or not decided(export, published, kind, settings, batch)
        for placement in ahead
    ]


def decided(
    export: ExportRequest, published: str, kind: str, settings: SearchSettings, batch: int
) -> bool:
    """Whether the search at `batch` will take a cached decision instead of probing."""
    key = cache.decision_key(
        export.model,
        published,
        batch,
        kind,
        weights=export.weights,
        small=export.small,
        seed=export.seed,
    )
    return cache.load_decision(key, settings.depth, settle_batch=settings.settle_batch) is not None


def compile_one(request: CompileRequest) -> dict:
    """Load the candidate as the search's probe loads it (its compile runs in `load`), then close
    it; what it left is inductor's caches. The record: label, seconds, compile_s, the compile's
    cache outcome, this process's peak RSS, and the error (None where it compiled)."""
    import torch

    torch._inductor.config.autotune_local_cache = False  # the job tunes its kernels alone
    started = time.perf_counter()
    record: dict = {"label": request.label, "error": None}
    session = None
    try:
        model = request.export.export()
        session = require_backend(request.placement.backend).load(
            model, request.placement.backend_config(), request.batch
        )
        description = session.description
        record.update(
            compile_s=description.get("compile_s"), compile_cache=description.get("compile_cache")
        )
        if description.get("compile_fallback"):
            record["error"] = f"torch.compile failed ({description['compile_fallback']})"
    except Exception as exc:  # noqa: BLE001 - one failed compile is left to its job
        record["error"] = error_line(exc)
    finally:
        if session is not None:
            session.close()
    record.update(
        seconds=round(time.perf_counter() - started, 1), peak_rss_bytes=own_peak_rss_bytes()
    )
    return record


def main(argv: list[str]) -> int:
    record = compile_one(CompileRequest.from_dict(json.loads(argv[0])))
    print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
