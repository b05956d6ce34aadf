"""A backend session's description as a typed record: what publishing judges a session by (its
comparability, ByteMLPerf's passes, its compile, where its kernels ran), every other setting kept
as written. Its own module so that both a result's backend section (kit.results.sections) and each
timed window (kit.results.windows: the session of that batch) hold one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kit.results.reasons import DifferenceCode, Reason, difference_code
from kit.results.values import _READ, Json, Record, _map, _or, _strings, _text


@dataclass(frozen=True, kw_only=True)
class Placement(Record):
    """Where a GPU session's kernels ran, from its profiled warm-up (none off the GPU)."""

    kernels: int = field(default=0, metadata={_READ: _or(0)})
    kernels_by_provider: Json = field(default_factory=dict, metadata={_READ: _map})
    cpu_share: float | None = None
    method: str = field(default="", metadata={_READ: _text})

    @property
    def on_cpu(self) -> int:
        """How many of the kernels ONNX Runtime placed on the host CPU."""
        return int(self.kernels_by_provider.get("CPUExecutionProvider", 0))


@dataclass(frozen=True, kw_only=True)
class Session(Record):
    """A backend session's description. What publishing judges by is typed; every other setting
    (they differ per backend) stays in `more`, and `items` is all of them as written."""

    comparable: bool | None = None
    missing_passes: tuple[str, ...] = field(default=(), metadata={_READ: _strings})
    not_comparable: tuple[str, ...] = field(default=(), metadata={_READ: _strings})
    # each reason's code
    not_comparable_codes: tuple[str, ...] = field(default=(), metadata={_READ: _strings})
    poprt_version: str | None = None
    compile_seconds: float | None = None
    compile_fallback: str | None = None  # why a torch.compile fell back to eager, where it did
    placement: Placement = field(default_factory=Placement, metadata={_READ: Placement.from_dict})

    @property
    def items(self) -> dict[str, Any]:
        """Every setting as the backend wrote it (for showing and comparing)."""
        return self.to_dict()

    @property
    def differences(self) -> tuple[Reason, ...]:
        """Each reason the session gave for not being ByteMLPerf's recipe, with its code (SESSION,
        said by its sentence, where a description has fewer codes than reasons)."""
        codes = self.not_comparable_codes + (DifferenceCode.SESSION,) * len(self.not_comparable)
        return tuple(
            Reason(text, difference_code(code))
            for text, code in zip(self.not_comparable, codes, strict=False)
        )

    def scalars(self) -> dict[str, str | int | float | bool]:
        """The settings that are one value each (what two runs' sessions are compared by)."""
        return {k: v for k, v in self.items.items() if isinstance(v, str | int | float | bool)}
