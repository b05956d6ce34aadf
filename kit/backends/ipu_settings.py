"""Graphcore's published per-model IPU settings for the ByteMLPerf C600 rows, as data.

Source: ByteMLPerf @a30b4f9 (reference/bytemlperf_model_specs.csv: ipu_interact_batch_sizes,
ipu_pack_batch_size, ipu_clients; reference/bytemlperf_ipu_reports.csv: precisions and batch sizes
of the published rows; reference/ipu_stack.md). Compiler options beyond PopRT's defaults are not
in those sources, so the kit uses the defaults and says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from kit.errors import UnknownNameError

SOURCE = "ByteMLPerf a30b4f9 (model_zoo + reports/IPU), PopRT 1.4.0 / Poplar SDK 3.3.0"
FP8_PARAMS = "F143,F143,-3,-3"  # input format, weight format, input scale, weight scale
PACK_NOTE = ("published row used PopRT pack mode (PackRunner, first_fit); the kit runs the unpacked "
             "model at the pack batch size, so its samples/s are not comparable with the pack row")


@dataclass(frozen=True)
class IpuModelSettings:
    """What Graphcore ran for one model: batch sizes per precision, clients, pack mode."""

    model: str
    batch_sizes: dict[str, tuple[int, ...]]  # precision -> batch sizes actually run on the IPU
    clients: int | None  # None: blank in the spec CSV (the kit then uses 1 and says so)
    pack_batch_size: dict[str, int] = field(default_factory=dict)  # precision -> pack batch
    fp8_params: str | None = None
    compiler_options: dict = field(default_factory=dict)

    @property
    def precisions(self) -> tuple[str, ...]:
        return tuple(self.batch_sizes)

    @property
    def pack_mode(self) -> bool:
        return bool(self.pack_batch_size)

    def clients_or_default(self) -> int:
        return self.clients or 1

    def to_dict(self) -> dict:
        d = asdict(self)
        d["batch_sizes"] = {k: list(v) for k, v in self.batch_sizes.items()}
        d["source"] = SOURCE
        if self.pack_mode:
            d["pack_note"] = PACK_NOTE
        if self.clients is None:
            d["clients_note"] = "clients blank in the published spec; the kit uses 1"
        return d


def _pack(model: str, fp16: int, clients: int | None, fp8: int | None = None) -> IpuModelSettings:
    sizes = {"fp16": (fp16,)} | ({"fp8": (fp8,)} if fp8 else {})
    packs = {"fp16": fp16} | ({"fp8": fp8} if fp8 else {})
    return IpuModelSettings(model, sizes, clients, packs, FP8_PARAMS if fp8 else None)


SETTINGS: dict[str, IpuModelSettings] = {s.model: s for s in (
    IpuModelSettings("resnet50-torch-fp32", {"fp16": (4, 32), "fp8": (4, 32)}, 4,
                     fp8_params=FP8_PARAMS),
    IpuModelSettings("clip-onnx-fp32", {"fp16": (4, 40)}, 3),
    IpuModelSettings("conformer-encoder-onnx-fp32", {"fp16": (4, 44)}, 4),
    IpuModelSettings("videobert-onnx-fp32", {"fp16": (4, 42)}, 3),
    IpuModelSettings("roformer-tf-fp32", {"fp16": (2, 12)}, 1),
    IpuModelSettings("swin-large-torch-fp32", {"fp16": (2,), "fp8": (4,)}, 4, fp8_params=FP8_PARAMS),
    IpuModelSettings("widedeep-tf-fp32", {"fp16": (1024, 20000)}, 5),
    _pack("albert-torch-fp32", 40, 1),
    _pack("bert-torch-fp32", 40, None, fp8=45),
    _pack("roberta-torch-fp32", 40, 1),
    _pack("deberta-torch-fp32", 10, 1),
)}


def settings_for(model: str) -> IpuModelSettings:
    """The published settings of `model` (UnknownNameError lists the models that have them)."""
    if model not in SETTINGS:
        raise UnknownNameError("model with published IPU settings", model, SETTINGS)
    return SETTINGS[model]


def batch_sizes_for(model: str, precision: str) -> tuple[int, ...]:
    s = settings_for(model)
    if precision not in s.batch_sizes:
        raise UnknownNameError(f"published IPU precision for {model}", precision, s.batch_sizes)
    return s.batch_sizes[precision]
