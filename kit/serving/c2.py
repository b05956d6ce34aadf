"""The C2 card's published latency table as simulator input: a PREDICTION, never a measurement.

Qwant's Table 1 gives ms per card batch with one PopART session per IPU (micro batch = batch/2),
so each IPU is one server taking L(b) for a micro batch of b/2.
"""

from __future__ import annotations

import csv
from pathlib import Path

from kit.errors import MissingResource
from kit.paths import published_dir

C2_IPUS = 2
SOURCE = "seed 003, Kacher et al. (Qwant), Table 1: ResNeXt101 latency, ms per batch"


def published_c2_latency(csv_path: Path | None = None) -> dict[int, float]:
    """{card batch: ms} from data/published/figures.csv (study c2_qwant, Table 1, Latency)."""
    path = Path(csv_path) if csv_path else published_dir() / "figures.csv"
    if not path.exists():
        raise MissingResource(f"no published figures at {path}: pass c2_latency_ms={{batch: ms}} instead")
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f)
                if r["study"] == "c2_qwant" and r["table"] == "Table 1" and r["metric"] == "Latency"]
    if not rows:
        raise MissingResource(f"{path} has no c2_qwant Table 1 latency rows")
    return {int(r["batch_size"]): float(r["value"]) for r in rows}


def per_ipu_table(card_latency_ms: dict[int, float], ipus: int = C2_IPUS) -> dict[int, float]:
    """Card batch b -> micro batch b/ipus per IPU server, same ms (the IPUs run in parallel)."""
    return {int(b) // ipus: float(ms) for b, ms in card_latency_ms.items() if int(b) % ipus == 0}
