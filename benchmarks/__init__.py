"""Benchmarks run by `make bench` (see run_all.py)."""

import os

# Set before any benchmark imports torch (libgomp reads it once, at load): spinning OpenMP
# workers collapsed torch's throughput 3-4x on cores shared with other processes, and passive
# waiting costs little on an idle machine. Export OMP_WAIT_POLICY to override.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
