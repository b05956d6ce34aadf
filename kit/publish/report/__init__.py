"""Tables, plots and provenance blocks the notebooks display, all built from a RunResult.

One module per concern: `tables` (the study tables), `provenance` (where a result came from and
what it shows), `plots` (plots and the C2 tables), `server` (the server scenario), `views` (what a
report displays: its verdict sentence first, no NaN cell, an empty table as a sentence, the power
said once).
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
    time_table,
    with_interval,
)
from kit.publish.report.views import (  # noqa: F401
    Sentence,
    accuracy_view,
    beside_view,
    c2_views,
    latency_view,
    numerics_view,
    opening,
    peaks_view,
    power_unavailable,
    power_view,
    roofline_view,
    search_view,
    time_view,
    view,
)

__all__ = [
    "METHODS",
    "Sentence",
    "accuracy_table",
    "accuracy_view",
    "beside_published",
    "beside_view",
    "bytemlperf_table",
    "c2_tables",
    "c2_views",
    "compute_columns",
    "error_banner",
    "interpretation",
    "latency_view",
    "noise_text",
    "numerics_table",
    "numerics_view",
    "opening",
    "peaks_table",
    "peaks_view",
    "plot_batches",
    "plot_c2",
    "plot_published_c2",
    "plot_server",
    "power_columns",
    "power_table",
    "power_unavailable",
    "power_view",
    "precision_text",
    "provenance",
    "published_per_batch",
    "roofline_method",
    "roofline_table",
    "roofline_view",
    "scorecard_rows",
    "search_table",
    "search_view",
    "server_best",
    "server_c2_prediction",
    "server_interpretation",
    "server_tables",
    "view",
    "with_interval",
]
