"""The published figures (`figures`: data/published/*.csv as DataFrames, ByteMLPerf's IPU
settings, the audit of their consistency) and their declared schemas (`schema`).

Floor 1 of kit/ (docs/architecture.md): imports only the leaves (never kit.hardware: the two are
independent).
"""
