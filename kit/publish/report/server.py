"""The server scenario's tables, plot and sentence."""

from __future__ import annotations

import html

import pandas as pd

from kit.results import ResultStatus, RunResult


def server_tables(result: RunResult) -> dict[str, pd.DataFrame]:
    """The server study's tables (fixed_batch, probes, best, simulated_curve, c2_prediction)."""
    return {k: pd.DataFrame(v) for k, v in result.tables.to_dict().items()}


def server_best(result: RunResult) -> pd.DataFrame:
    """Per policy: LoadGen's highest passing QPS beside the simulator's prediction."""
    cols = [
        "policy",
        "loadgen_best_qps",
        "loadgen_p99_ms",
        "loadgen_result",
        "loadgen_reasons",
        "sim_best_qps",
        "prediction_error_pct",
        "capacity_qps",
    ]
    best = pd.DataFrame(list(result.sections.tables.best))
    return best[cols] if not best.empty else pd.DataFrame(columns=cols)


def server_c2_prediction(result: RunResult) -> pd.DataFrame:
    """What the C2 card would sustain (a PREDICTION), or why it was skipped."""
    tables = result.sections.tables
    if tables.c2_prediction_skipped:
        return pd.DataFrame({"note": [f"C2 prediction skipped: {tables.c2_prediction_skipped}"]})
    return pd.DataFrame(list(tables.c2_prediction))


def plot_server(result: RunResult):
    """p99 latency against offered load: LoadGen probes and the simulated curve per policy."""
    import matplotlib.pyplot as plt

    tables = result.sections.tables
    fig, ax = plt.subplots(figsize=(7, 4))
    probes, curve = (pd.DataFrame(list(rows)) for rows in (tables.probes, tables.simulated_curve))
    for i, (policy, rows) in enumerate(
        probes.groupby("policy", sort=False) if not probes.empty else []
    ):
        sim = curve[curve.policy == policy]
        ax.plot(sim.offered_qps, sim.sim_p99_ms, "--", color=f"C{i}", label=f"{policy} simulated")
        ax.plot(
            rows.offered_qps, rows.loadgen_p99_ms, "o", color=f"C{i}", label=f"{policy} LoadGen"
        )
    bound = result.parameters.get("latency_bound_ms")
    if bound:
        ax.axhline(bound, color="k", lw=0.8)
    p = result.parameters
    ax.set(
        xlabel="offered QPS (Poisson)",
        ylabel="p99 latency (ms)",
        yscale="log",
        title=f"{p.get('model')} on {p.get('backend')} {p.get('precision')}: p99 vs offered load",
    )
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return fig


def server_interpretation(result: RunResult) -> str:
    """The best policy in one sentence, or why none kept p99 under the bound."""
    if result.status != ResultStatus.OK:
        return f"<p>This run did not complete: {html.escape('; '.join(result.errors))}</p>"
    best = server_best(result).dropna(subset=["loadgen_best_qps"])
    bound = result.parameters.get("latency_bound_ms")
    if best.empty:
        return (
            f"<p>No policy kept p99 under {bound:g} ms on this hardware, even at the lowest rate "
            "probed.</p>"
        )
    top = best.loc[best.loadgen_best_qps.idxmax()]
    p99 = f"{top.loadgen_p99_ms:.0f} ms" if pd.notna(top.loadgen_p99_ms) else "— (not recorded)"
    if pd.notna(top.sim_best_qps):
        err = top.prediction_error_pct
        predicted = f"the simulation predicted {top.sim_best_qps:.3g} QPS" + (
            f" ({err:+.0f} %)." if pd.notna(err) else "."
        )
    else:
        predicted = f"the simulation found no rate whose p99 stays under {bound:g} ms."
    return (
        f"<p>Best policy {html.escape(top.policy)}: {top.loadgen_best_qps:.3g} QPS with p99 {p99} "
        f"(LoadGen {html.escape(str(top.loadgen_result))}); {predicted}</p>"
    )
