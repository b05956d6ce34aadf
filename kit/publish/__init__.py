"""Publishing: the reports (`report/`), the scorecard (`scorecard`), published vs measured
verdicts (`compare`), two runs side by side (`compare_runs`), the index page (`site`,
`index_content`), the scorecard read at a glance (`glance`) and its HTML table (`card_table`), a
result in ByteMLPerf's report format (`bytemlperf_export`) and other vendors' ByteMLPerf reports
beside the scorecard (`imported_reports`). Reads result JSON only: it never runs a backend or a
model.

Floor 9 of kit/ (docs/architecture.md): may import every floor below (kit.batch for the batch's
state); only kit.cli and kit.notebook import it.
"""
