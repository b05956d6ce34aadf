"""The published figures (`figures`: data/published/*.csv as DataFrames, ByteMLPerf's IPU
settings, the audit of their consistency), their declared schemas (`schema`) and ByteMLPerf's
report format, read and checked (`bytemlperf_reports`: the kit's export and any vendor's reports).

Floor 1 of kit/ (docs/architecture.md): imports only the leaves (never kit.hardware: the two are
independent).
"""
