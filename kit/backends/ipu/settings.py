"""ByteMLPerf's per-model IPU settings turned into what the kit passes to PopRT.

The single source is the data: `kit.published.figures.ipu_model_settings(model)` (ByteMLPerf's
interact_infos JSONs at a30b4f9, and the fallbacks its IPU backend code applies). This module only
applies ByteMLPerf's rules to them: `fp8_configs` merged over the base at fp8, the twelve compiler
options with their fallbacks (`num_iotiles` is PopRT's `num_io_tiles`), the pack config, and the
custom passes the kit has no equivalent for (the row is then not comparable, and says why).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field

from kit.errors import UnknownNameError
from kit.published import figures as published


@dataclass(frozen=True, kw_only=True)
class IpuRunPlan:
    """What the kit runs for one model at one precision, following ByteMLPerf."""

    model: str
    precision: str
    clients: int
    batch_sizes: tuple[int, ...]
    converter_options: dict  # poprt.Converter keywords (input_shape is added per batch size)
    compiler_options: dict  # CompilerOptions attribute -> value, PopRT's names
    pack: dict | None = None  # PackRunnerConfig settings for the BERT family
    missing_passes: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    source: str = ""
    settings: dict = field(default_factory=dict)  # the merged ByteMLPerf settings, for the record

    @property
    def comparable(self) -> bool:
        """False when a custom pass ByteMLPerf used has no kit equivalent, or the precision
        differs."""
        return not self.missing_passes and not any(
            n.startswith("not comparable") for n in self.notes
        )

    def to_dict(self) -> dict:
        d = asdict(self)
        d["batch_sizes"] = list(self.batch_sizes)
        d["comparable"] = self.comparable
        return d


def models() -> list[str]:
    """The models ByteMLPerf has IPU settings for."""
    try:
        published.ipu_model_settings("")
    except UnknownNameError as exc:
        return list(exc.known)
    return []


def merged_settings(settings: dict, precision: str) -> dict:
    """ByteMLPerf's merge: at fp8, each `fp8_configs` section updates the base dict of the same
    name (or replaces a non-dict value such as `batch_sizes`); `fp8_configs` is then dropped."""
    out = copy.deepcopy(settings)
    fp8 = out.pop("fp8_configs", None)
    if precision == "fp8" and fp8:
        for name, section in fp8.items():
            if isinstance(out.get(name), dict):
                out[name].update(section)
            else:
                out[name] = copy.deepcopy(section)
    return out


def compiler_options(settings: dict, defaults: dict) -> tuple[dict, list[str]]:
    """The twelve options ByteMLPerf sets, each the JSON value or its fallback, under PopRT's
    names."""
    fallbacks = defaults["compiler_option_fallbacks"]["value"]
    names = defaults["compiler_option_names"]["value"]
    given = settings.get("compiler_options", {})
    options = {names.get(k, k): given.get(k, fallback) for k, fallback in fallbacks.items()}
    ignored = sorted(set(given) - set(fallbacks))
    notes = (
        [
            f"compiler option(s) {ignored} are in the JSON but ByteMLPerf does not apply them; "
            "neither does the kit"
        ]
        if ignored
        else []
    )
    return options, notes


def pack_settings(model: str, settings: dict, defaults: dict) -> dict | None:
    """PackRunnerConfig settings (ByteMLPerf's runtime_backend_ipu.py), or None outside pack
    mode."""
    config = settings.get("pack_config")
    if not config:
        return None
    fallbacks = defaults["pack_fallbacks"]["value"]
    model_inputs = defaults["pack_model_inputs"]["value"].get(model, {})
    return {
        "batch_size": int(config["batch_size"]),
        "input_names": list(config["input_names"]),
        "dynamic_input_name": config["dynamic_input_name"],
        "mask_name": config["mask_name"],
        "max_valid_num": int(config.get("max_pack_num", fallbacks["max_pack_num"])),
        "timeout_microseconds": int(
            config.get("timeout_microseconds", fallbacks["timeout_microseconds"])
        ),
        "algorithm": fallbacks["algorithm"],
        "model_inputs": dict(model_inputs),
        "benchmark": dict(defaults["benchmark_pack"]["value"]),
    }


def plan_for(model: str, precision: str) -> IpuRunPlan | None:
    """ByteMLPerf's settings for `model` at `precision`, or None when ByteMLPerf has none for it."""
    try:
        raw = published.ipu_model_settings(model)
    except UnknownNameError:
        return None
    defaults = raw["defaults"]
    settings = merged_settings(raw["settings"], precision)
    notes: list[str] = []
    converter = dict(settings.get("converter_options", {}))
    published_precision = converter.get("precision") or ""
    allowed = (
        [published_precision] if published_precision else defaults["precision_choices"]["value"]
    )
    if precision not in allowed:
        notes.append(
            f"not comparable: ByteMLPerf runs {model} at {' or '.join(allowed)}, "
            f"this run is {precision}"
        )
    converter["precision"] = precision
    custom = defaults["custom_passes"]["value"]
    passes = list(converter.get("used_passes", []))
    missing = tuple(p for p in passes if p in custom)
    converter["used_passes"] = [p for p in passes if p not in custom]
    notes += [
        f"ByteMLPerf's custom pass {p!r} ({custom[p]}) has no equivalent in the kit yet: the kit "
        "compiles without it, so this row is not comparable with the published one"
        for p in missing
    ]
    compiler, compiler_notes = compiler_options(settings, defaults)
    pack = pack_settings(model, settings, defaults)
    batch_sizes = (
        (pack["batch_size"],) if pack else tuple(int(b) for b in settings.get("batch_sizes", []))
    )
    return IpuRunPlan(
        model=model,
        precision=precision,
        clients=int(settings.get("clients", 1)),
        batch_sizes=batch_sizes,
        converter_options=converter,
        compiler_options=compiler,
        pack=pack,
        missing_passes=missing,
        notes=tuple(notes + compiler_notes),
        source=raw["source"],
        settings=settings,
    )


def require_plan(model: str, precision: str) -> IpuRunPlan:
    """Like plan_for, but an unknown model is an error listing the models that have settings."""
    plan = plan_for(model, precision)
    if plan is None:
        raise UnknownNameError("model with ByteMLPerf IPU settings", model, models())
    return plan
