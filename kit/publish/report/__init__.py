"""Tables, plots and provenance blocks the notebooks display, all built from a RunResult.

One module per concern: `tables` (the study tables), `provenance` (where a result came from and
what it shows), `plots` (plots and the C2 tables), `server` (the server scenario).
"""

from kit.publish.report.plots import (  # noqa: F401
    c2_tables,
    plot_batches,
    plot_c2,
    plot_published_c2,
    published_per_batch,
)
from kit.publish.report.provenance import (  # noqa: F401
    METHODS,
    error_banner,
    interpretation,
    provenance,
    roofline_method,
)
from kit.publish.report.server import (  # noqa: F401
    plot_server,
    server_best,
    server_c2_prediction,
    server_interpretation,
    server_tables,
)
from kit.publish.report.tables import (  # noqa: F401
    accuracy_table,
    beside_published,
    bytemlperf_table,
    compute_columns,
    noise_text,
    numerics_table,
    peaks_table,
    power_columns,
    power_table,
    precision_text,
    roofline_table,
    scorecard_rows,
    search_table,
    with_interval,
)

__all__ = [
    "METHODS",
    "accuracy_table",
    "beside_published",
    "bytemlperf_table",
    "c2_tables",
    "compute_columns",
    "error_banner",
    "interpretation",
    "noise_text",
    "numerics_table",
    "peaks_table",
    "plot_batches",
    "plot_c2",
    "plot_published_c2",
    "plot_server",
    "power_columns",
    "power_table",
    "precision_text",
    "provenance",
    "published_per_batch",
    "roofline_method",
    "roofline_table",
    "scorecard_rows",
    "search_table",
    "server_best",
    "server_c2_prediction",
    "server_interpretation",
    "server_tables",
    "with_interval",
]
