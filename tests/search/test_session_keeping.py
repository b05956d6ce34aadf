"""kit.search.keeping: a searched torch.compile session is timed by the row's measurement, not
compiled a second time; every other session is closed as before, and none is left open.

The 'twin' backend below runs ONNX Runtime fp32 (so its numerics pass the gate) and counts its
loads; its "compile" option stands for torch.compile: costly to load, faster per call.
"""

from __future__ import annotations

import time

import pytest

from kit.backends import BACKENDS, BackendConfig, Placement, require_backend
from kit.backends.base import Backend, Session
from kit.backends.options import TorchOptions
from kit.results.windows import Noise
from kit.search import row
from kit.search.candidates import RowCandidate
from kit.search.context import SearchContext
from kit.search.duels import Runoff
from kit.search.keeping import SessionKeeper, costly_to_reload
from kit.search.precision_map import PrecisionChoice
from kit.search.probe import Probe

TINY = row.SearchSettings("quick", probe_s=0.05, min_count=2, warmup=0)
EAGER_EXTRA_S = 0.02  # the eager twin's extra time per call: it clearly loses to the compiled one


class TwinSession(Session):
    def __init__(self, inner, config: BackendConfig, log: list, batch: int):
        self.inner, self.config, self.log, self.batch = inner, config, log, batch
        self.compiled = bool(config.options.get("compile"))
        self.description = {
            "backend": "twin",
            "compile_s": 1.5 if self.compiled else None,
            "notes": [],
        }
        self.closed = False

    def run(self, inputs):
        self._slow()
        return self.inner.run(inputs)

    def bind(self, inputs):
        call = self.inner.bind(inputs)

        def step():
            self._slow()
            return call()

        return step

    def _slow(self) -> None:
        assert not self.closed, "a closed session was run"
        if not self.compiled:
            time.sleep(EAGER_EXTRA_S)

    def close(self) -> None:
        assert not self.closed, "a session closed twice"
        self.closed = True
        self.inner.close()
        self.log.append(("close", self.config.options.get("compile", False), self.batch))


class TwinBackend(Backend):
    name = "twin"
    options_type = TorchOptions  # a torch.compile stand-in
    precisions = ("fp32",)
    sessions: list[TwinSession] = []
    log: list = []

    def availability(self):
        return None

    def device_info(self, config):
        return {"kind": "cpu", "name": "twin device", "cores": 1, "peak": None}

    def load(self, model, config, batch_size):
        self.check_precision(config.precision)
        inner = require_backend("onnxruntime").load(model, BackendConfig("fp32", "cpu"), batch_size)
        session = TwinSession(inner, config, TwinBackend.log, batch_size)
        TwinBackend.sessions.append(session)
        TwinBackend.log.append(("load", config.options.get("compile", False), batch_size))
        return session


def eager() -> RowCandidate:  # made once 'twin' is registered (its options are checked by it)
    return RowCandidate.of("twin", "fp32", why="eager")


def compiled() -> RowCandidate:
    return RowCandidate.of("twin", "fp32", options={"compile": True}, why="torch.compile stand-in")


@pytest.fixture
def twin(small, outputs, monkeypatch):
    TwinBackend.sessions, TwinBackend.log = [], []
    BACKENDS.register("twin", TwinBackend)
    monkeypatch.setenv("KIT_CACHE", str(outputs / "cache"))
    monkeypatch.setattr(
        row, "today_plan", lambda *a: PrecisionChoice(Placement("twin", "fp32", "cpu"), "pinned")
    )
    monkeypatch.setattr(row, "idle_sample", lambda: Noise())
    try:
        yield small
    finally:
        BACKENDS.unregister("twin")


def loads(compiled: bool) -> int:
    return sum(1 for e in TwinBackend.log if e[0] == "load" and e[1] == compiled)


def test_only_a_compiled_candidate_is_costly_to_reload():
    def probe(options):
        return Probe(
            label="p",
            placement=Placement.of("torch", "fp16", "cuda", options, threads=None),
            native=True,
            why="",
        )

    assert costly_to_reload(probe({"compile": True, "compile_mode": "reduce-overhead"}))
    assert not costly_to_reload(probe({"cuda_graph": True})) and not costly_to_reload(probe({}))


def test_the_search_keeps_its_compiled_winner_open_and_hands_it_over_once(twin):
    with SessionKeeper() as keeper:
        decision = row.search_row(
            twin, "FP16", 1, "cpu", TINY, candidates=[eager(), compiled()], keeper=keeper
        )
        assert decision.chosen == compiled().label
        compile_s = {p.label: p.compile_s for p in decision.probes}
        # every probe says what compiling took
        assert compile_s == {eager().label: None, compiled().label: 1.5}
        assert loads(compiled=True) == 1
        kept = next(s for s in TwinBackend.sessions if s.compiled)
        assert not kept.closed
        assert keeper.take(1, "twin", BackendConfig("fp32", "cpu", None, {"compile": True})) is kept
        assert (
            keeper.take(1, "twin", BackendConfig("fp32", "cpu", None, {"compile": True})) is None
        )  # handed over once
        kept.close()
    assert all(s.closed for s in TwinBackend.sessions)


def test_a_compile_that_fell_back_to_eager_fails_its_probe_by_the_recorded_fact(twin, monkeypatch):
    """The session records why its compile fell back (`compile_fallback`); its note, for people,
    is not read: with none at all the compiled candidate still fails and is never chosen."""
    load = TwinBackend.load

    def falls_back(self, model, config, batch_size):
        session = load(self, model, config, batch_size)
        if session.compiled:
            session.compiled, session.description["compile_fallback"] = False, "recompile limit"
        return session

    monkeypatch.setattr(TwinBackend, "load", falls_back)
    with SessionKeeper() as keeper:
        decision = row.search_row(
            twin, "FP16", 1, "cpu", TINY, candidates=[eager(), compiled()], keeper=keeper
        )
    probe = next(p for p in decision.probes if p.label == compiled().label)
    assert probe.status == "failed" and "recompile limit" in probe.reason
    assert decision.chosen == eager().label


def test_a_kept_session_is_closed_when_the_measurement_would_load_another_configuration(twin):
    with SessionKeeper() as keeper:
        row.search_row(
            twin, "FP16", 1, "cpu", TINY, candidates=[eager(), compiled()], keeper=keeper
        )
        kept = next(s for s in TwinBackend.sessions if s.compiled)
        # other threads
        assert keeper.take(1, "twin", BackendConfig("fp32", "cpu", 2, {"compile": True})) is None
        assert kept.closed


def test_a_kept_session_is_never_handed_to_another_backend_with_the_same_settings(twin):
    with SessionKeeper() as keeper:
        row.search_row(
            twin, "FP16", 1, "cpu", TINY, candidates=[eager(), compiled()], keeper=keeper
        )
        kept = next(s for s in TwinBackend.sessions if s.compiled)
        assert (
            keeper.take(1, "onnxruntime", BackendConfig("fp32", "cpu", None, {"compile": True}))
            is None
        )
        assert kept.closed


def test_nothing_is_kept_where_the_eager_candidate_wins_and_every_session_is_closed(
    twin, monkeypatch
):
    monkeypatch.setattr(
        TwinSession, "_slow", lambda self: time.sleep(EAGER_EXTRA_S if self.compiled else 0.0)
    )
    with SessionKeeper() as keeper:
        decision = row.search_row(
            twin, "FP16", 1, "cpu", TINY, candidates=[eager(), compiled()], keeper=keeper
        )
        assert decision.chosen == "twin fp32 (cpu)"
        assert all(s.closed for s in TwinBackend.sessions)
        assert keeper.take(1, "twin", BackendConfig("fp32", "cpu", None, {})) is None


def test_the_row_measures_the_search_s_compiled_session_without_compiling_it_again(
    twin, monkeypatch
):
    from kit.studies import model_benchmark

    monkeypatch.setattr(model_benchmark, "load_model", lambda *a, **k: twin)
    monkeypatch.setattr(row, "row_candidates", lambda *a, **k: [eager(), compiled()])
    params = dict(
        model=twin.name,
        small=True,
        backend="twin",
        batch_sizes=[1],
        search=True,
        accuracy=False,
        roofline=False,
        power=False,
        warmup=0,
        min_duration_s=0.05,
        min_count=2,
        check_numerics=True,
    )
    result = model_benchmark.run(params)
    assert result.status == "ok", result.errors
    assert result.backend.options == {"compile": True}
    assert loads(compiled=True) == 1, TwinBackend.log  # compiled for the search only
    assert (
        "Batch 1: timed on the torch.compile session the search compiled for its probe (1.5 s, "
        "counted in the search phase) and then ran; not compiled again." in result.notes
    )
    assert len(result.measurements) == 1 and result.numerics[0].batch_size == 1
    assert all(s.closed for s in TwinBackend.sessions)

    again = model_benchmark.run(params)  # the decision comes from the cache: nothing kept, one load
    assert again.status == "ok" and loads(compiled=True) == 2
    assert not any(n.startswith("Batch 1: timed on the torch.compile session") for n in again.notes)
    assert all(s.closed for s in TwinBackend.sessions)


def test_a_runoff_duel_borrows_the_kept_session_and_leaves_it_open(twin):
    from kit.search import runoff
    from kit.search.planning import to_probe

    today = PrecisionChoice(Placement("twin", "fp32", "cpu"), "pinned")
    leader, challenger = to_probe(compiled(), today), to_probe(eager(), today)
    inputs = twin.make_inputs(1)
    with SessionKeeper() as keeper:
        kept = TwinBackend().load(twin, leader.backend_config(), 1)
        leader.status, leader.throughput = "measured", 1.0
        assert keeper.offer(1, leader, kept, None)
        ctx = SearchContext(
            model=twin, inputs=inputs, batch=1, window=TINY.measure_config(), keeper=keeper
        )
        d = runoff.duel(ctx, leader, challenger)
        assert not d.failed and d.rounds >= runoff.RUNOFF_ROUNDS
        assert loads(compiled=True) == 1 and not kept.closed  # lent, not loaded again nor closed
        assert all(s.closed for s in TwinBackend.sessions if s is not kept)
        assert keeper.take(1, "twin", leader.backend_config()) is kept
        kept.close()


class Closable:
    def __init__(self):
        self.closed = False

    def close(self):
        self.closed = True


def test_the_keeper_holds_only_the_compiled_leader_at_each_batch():
    def probe(label, throughput, options=None, status="measured"):
        return Probe(
            label=label,
            placement=Placement.of(
                "torch",
                "fp16",
                "cuda",
                {"compile": True} if options is None else options,
                threads=None,
            ),
            native=True,
            why="",
            status=status,
            throughput=throughput,
        )

    keeper, first, second = SessionKeeper(), Closable(), Closable()
    eager = probe("eager", 100.0, options={})
    assert not keeper.offer(4, eager, Closable(), None)  # reloads cheaply: never kept
    assert not keeper.offer(4, probe("slow", 90.0), Closable(), eager)  # behind the leader
    # stopped early
    assert not keeper.offer(4, probe("lost", 900.0, status="lost"), Closable(), eager)
    assert keeper.offer(4, probe("a", 120.0), first, eager)
    assert keeper.offer(4, probe("b", 150.0), second, probe("a", 120.0))
    assert first.closed and not second.closed  # one kept per batch: the earlier one closed
    keeper.keep_only(4, "b")
    assert not second.closed
    keeper.keep_only(4, "eager")  # the lead (or the choice) went elsewhere
    assert second.closed and keeper.lend(4, probe("b", 150.0)) is None


def test_one_session_is_kept_at_a_time_across_batches():
    """On a GPU every published batch is searched before any is measured: the last search's
    compiled session is kept, never one per batch on the device at once."""

    def probe(label):
        return Probe(
            label=label,
            placement=Placement.of("torch", "fp16", "cuda", {"compile": True}, threads=None),
            native=True,
            why="",
            status="measured",
            throughput=100.0,
        )

    keeper, at_4, at_32 = SessionKeeper(), Closable(), Closable()
    assert keeper.offer(4, probe("c"), at_4, None) and keeper.offer(32, probe("c"), at_32, None)
    assert at_4.closed and not at_32.closed
    assert keeper.take(4, "torch", probe("c").backend_config()) is None and not at_32.closed
    keeper.keep_batches([4])  # 32 is not measured (a CPU searches at a batch of its own)
    assert at_32.closed and keeper.lend(32, probe("c")) is None


def test_a_failing_close_still_forgets_the_session():
    class Failing(Closable):
        def close(self):
            raise RuntimeError("driver error")

    keeper = SessionKeeper()
    keeper.offer(
        4,
        Probe(
            label="c",
            placement=Placement.of("torch", "fp16", "cuda", {"compile": True}, threads=None),
            native=True,
            why="",
            status="measured",
            throughput=1.0,
        ),
        Failing(),
        None,
    )
    with pytest.raises(RuntimeError, match="driver error"):
        keeper.close()
    keeper.close()  # nothing left to close twice


def test_a_search_that_chooses_another_candidate_closes_the_kept_one(twin, monkeypatch):
    """The runoff (or the rule that keeps today's mapping against noise) may choose another
    candidate than the leader the keeper holds: the kept session is closed with the decision."""
    from kit.search import runoff

    monkeypatch.setattr(runoff, "run", lambda *a, **k: Runoff(winner=eager().label, within=0.7))
    with SessionKeeper() as keeper:
        decision = row.search_row(
            twin, "FP16", 1, "cpu", TINY, candidates=[eager(), compiled()], keeper=keeper
        )
        assert decision.chosen == eager().label
        assert all(s.closed for s in TwinBackend.sessions)


def test_a_session_kept_at_a_batch_that_is_not_measured_is_closed_before_the_measurement(
    twin, monkeypatch
):
    """A CPU searches at one batch (search_batch) and runs its decision at every published one."""
    from kit.studies import model_benchmark

    monkeypatch.setattr(model_benchmark, "load_model", lambda *a, **k: twin)
    monkeypatch.setattr(row, "row_candidates", lambda *a, **k: [eager(), compiled()])
    result = model_benchmark.run(
        dict(
            model=twin.name,
            small=True,
            backend="twin",
            batch_sizes=[1],
            search_batch=2,
            search=True,
            accuracy=False,
            roofline=False,
            power=False,
            warmup=0,
            min_duration_s=0.05,
            min_count=2,
        )
    )
    assert result.status == "ok", result.errors
    log = TwinBackend.log
    # not held while batch 1 runs
    assert log.index(("close", True, 2)) < log.index(("load", True, 1))
    assert all(s.closed for s in TwinBackend.sessions)


def test_on_a_gpu_each_batch_is_measured_right_after_its_search_on_the_session_it_kept(
    twin, monkeypatch
):
    """A GPU searches every published batch: each one is measured before the next is searched, so
    every batch's compiled winner is timed without a second compile and no compiled model waits
    on the device while another batch is searched."""
    from kit.studies import model_benchmark

    on_gpu = [
        RowCandidate.of("twin", "fp32", "cuda", why="eager"),
        RowCandidate.of("twin", "fp32", "cuda", options={"compile": True}, why="compiled"),
    ]
    monkeypatch.setattr(model_benchmark, "load_model", lambda *a, **k: twin)
    monkeypatch.setattr(row, "row_candidates", lambda *a, **k: on_gpu)
    monkeypatch.setattr(
        row, "today_plan", lambda *a: PrecisionChoice(Placement("twin", "fp32", "cuda"), "pinned")
    )
    result = model_benchmark.run(
        dict(
            model=twin.name,
            small=True,
            backend="twin",
            device="cuda",
            hardware="cuda",
            batch_sizes=[1, 2],
            search=True,
            accuracy=False,
            roofline=False,
            power=False,
            warmup=0,
            min_duration_s=0.05,
            min_count=2,
        )
    )
    assert result.status == "ok", result.errors
    log = TwinBackend.log
    # searches only
    assert [e for e in log if e[0] == "load" and e[1]] == [("load", True, 1), ("load", True, 2)]
    # batch 1 done before batch 2's search
    assert log.index(("close", True, 1)) < log.index(("load", False, 2))
    assert [n[:7] for n in result.notes if "torch.compile session the search compiled" in n] == [
        "Batch 1",
        "Batch 2",
    ]
    assert [s["batch_size"] for s in result.tables.to_dict()["search_by_batch"]] == [1, 2]
    assert {m.batch_size: m.searched_plan["decided_at_batch"] for m in result.measurements} == {
        1: 1,
        2: 2,
    }
    assert result.backend.options == {"compile": True} and all(
        s.closed for s in TwinBackend.sessions
    )
