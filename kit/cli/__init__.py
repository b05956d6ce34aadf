"""The `kit` command (`main`) and its commands, each in its own module: `models` (kit models,
kit export, kit fetch-weights), `datasets` (kit fetch-data, kit datasets), `reproduce` (kit
reproduce, kit site, kit rebuild-state), `compare` (kit compare), `rerun` (kit rerun),
`import_bytemlperf` and `export_bytemlperf` (kit import-bytemlperf, kit export-bytemlperf), `lab`
(make lab).

Top floor of kit/ (docs/architecture.md), beside kit.notebook: may import everything; nothing
in kit imports it.
"""
