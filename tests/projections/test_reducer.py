"""The projection reducer, called directly: one event in, the expected state out (no SQLite)."""

from __future__ import annotations

import copy

import attrs

from realmem.events import types as ev
from realmem.events.types import Envelope, Fields, Key, content_hash
from realmem.projections.state import (reducers, Counter, Imported, Memory, Pending, Problem, State, Store,
                                       Urgency, apply)

S, T, ID = "shared:git-abc", "personal:git-abc", "AZJrPlwafS-aSxwtPk9aaw"
K = Key(S, ID)


def fields(caption: str = "Tests run with pytest", content: str = "uv run pytest -q", paths=("tests",),
           file: str = "tests-run-with-pytest.md") -> Fields:
    return Fields(caption, content, list(paths), "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", file, "text")


def env(event: ev.Event, seq: int = 7) -> Envelope:
    return Envelope(seq, "2026-01-02T00:00:00Z", 1, "session-1", event)


def memory(f: Fields | None = None, *, store: str = S, source: str = "remember", quarantined: str | None = None,
           seq: int = 1) -> Memory:
    f = f or fields()
    return Memory(store, ID, f, content_hash(f.caption, f.content), source, quarantined, seq)


def with_memory(**counters: int) -> State:
    st = State()
    st.memories[K] = memory()
    st.counters[K] = Counter(**counters)
    return st


def folded(state: State, event: ev.Event, seq: int = 7) -> State:
    after = copy.deepcopy(state)
    apply(after, env(event, seq))
    return after


def test_every_event_type_has_a_reducer() -> None:
    assert set(reducers()) == set(ev.TYPES.values())


def test_added() -> None:
    st = folded(State(), ev.MemoryAdded(S, ID, fields(), "remember"))
    assert st.memories == {K: memory(source="remember", seq=7)}
    assert st.counters == {K: Counter()}


def test_a_memory_holds_the_fields_its_event_carried() -> None:
    f = fields(caption="Lint with ruff", content="ruff check .", paths=["src"])
    m = folded(State(), ev.MemoryAdded(S, ID, f, "remember")).memories[K]
    assert m.fields == f
    assert (m.caption, m.content, m.paths, m.created, m.updated, m.file, m.text) == attrs.astuple(f)
    assert m.hash == content_hash("Lint with ruff", "ruff check .")


def test_added_clears_a_problem_with_its_file() -> None:
    st = State(problems={(S, "tests-run-with-pytest.md"): Problem(S, "tests-run-with-pytest.md", "malformed", "x", 1, "d")})
    assert folded(st, ev.MemoryAdded(S, ID, fields(), "add")).problems == {}


def test_edited_keeps_quarantine_adds_used_and_keeps_missing_paths_still_named() -> None:
    st = with_memory(used_count=2)
    st.memories[K].quarantined = "secret"
    st.missing[K] = {"tests": None, "gone": "moved"}
    after = folded(st, ev.MemoryEdited(S, ID, fields(content="pytest -x", paths=["tests"]), "merge", used_delta=3))
    assert after.memories[K] == memory(fields(content="pytest -x"), source="merge", quarantined="secret", seq=7)
    assert after.counters[K] == Counter(used_count=5)
    assert after.missing == {K: {"tests": None}}


def test_edited_drops_missing_when_no_missing_path_is_left() -> None:
    st = with_memory()
    st.missing[K] = {"gone": None}
    assert folded(st, ev.MemoryEdited(S, ID, fields(paths=["tests"]), "manual")).missing == {}


def test_forgotten_drops_memory_counters_urgency_and_missing() -> None:
    st = with_memory(used_count=1)
    st.urgency[K] = Urgency("v", 0.9, {"2": 0.9}, 0.8, "remember")
    st.missing[K] = {"x": None}
    after = folded(st, ev.MemoryForgotten(S, ID, "forget"))
    assert (after.memories, after.counters, after.urgency, after.missing) == ({}, {}, {}, {})


def test_moved_carries_counters_urgency_source_and_quarantine() -> None:
    st = with_memory(used_count=3, path_inject_count=4)
    st.memories[K].quarantined = "q"
    st.urgency[K] = Urgency("v", 0.5, {"1": 1.0}, None, "background")
    after = folded(st, ev.MemoryMoved(S, ID, T, fields(), "manual"))
    dst = Key(T, ID)
    assert set(after.memories) == {dst}
    assert after.memories[dst] == memory(store=T, source="remember", quarantined="q", seq=7)
    assert after.counters == {dst: Counter(3, 4)}
    assert after.urgency == {dst: Urgency("v", 0.5, {"1": 1.0}, None, "background")}


def test_observed_change_and_delete() -> None:
    st = folded(State(), ev.FileObserved(S, ID, "added", fields(), quarantine="injection"))
    assert st.memories[K] == memory(source="observed", quarantined="injection", seq=7)
    st.problems[(S, "tests-run-with-pytest.md")] = Problem(S, "tests-run-with-pytest.md", "malformed", "m", None, "d")
    gone = folded(st, ev.FileObserved(S, ID, "deleted"))
    assert (gone.memories, gone.counters, gone.problems) == ({}, {K: Counter()}, {})


def test_a_deleted_file_leaves_an_absent_memory_whose_counts_come_back_with_it() -> None:
    st = with_memory(used_count=3, path_inject_count=2)
    st.urgency[K] = Urgency("v", 0.9, {"2": 0.9}, 0.8, "remember")
    st.missing[K] = {"tests": None}
    gone = folded(st, ev.FileObserved(S, ID, "deleted"))
    assert (gone.memories, gone.missing) == ({}, {})
    assert gone.counters == {K: Counter(3, 2)} and gone.urgency == {K: st.urgency[K]}
    assert folded(gone, ev.Reinforced(S, ID)).counters == {K: Counter(3, 2)}  # absent: nothing counts
    back = folded(gone, ev.FileObserved(S, ID, "added", fields()), seq=9)
    assert back.memories[K] == memory(source="observed", seq=9)
    assert back.counters == {K: Counter(3, 2)} and back.urgency == {K: st.urgency[K]}


def test_file_problem_recorded_then_resolved() -> None:
    st = folded(State(), ev.FileProblem(S, "a.md", "malformed", "bad yaml", 3, "d1"))
    assert st.problems == {(S, "a.md"): Problem(S, "a.md", "malformed", "bad yaml", 3, "d1")}
    assert folded(st, ev.FileProblem(S, "a.md", "resolved", "")).problems == {}


def test_approved_lifts_quarantine() -> None:
    st = with_memory()
    st.memories[K].quarantined = "secret"
    assert folded(st, ev.MemoryApproved(S, ID)).memories[K].quarantined is None
    assert folded(State(), ev.MemoryApproved(S, ID)) == State()


def test_reinforced_and_recalled_count_uses_of_known_memories_only() -> None:
    st = with_memory(used_count=1)
    assert folded(st, ev.Reinforced(S, ID)).counters[K] == Counter(used_count=2)
    hit = folded(st, ev.RecallHit([(S, ID), (T, "unknown")]))
    assert hit.counters == {K: Counter(used_count=2)}


def test_notes_shown_count_injections() -> None:
    after = folded(with_memory(), ev.PathNotesShown([(S, ID), (T, "unknown")], ["tests/a.py"], "read"))
    assert after.counters == {K: Counter(path_inject_count=1)}


def test_urgency_judged_for_known_memories_only() -> None:
    e = ev.UrgencyJudged(S, ID, "v", 0.7, {"2": 0.7}, 0.9, "background")
    assert folded(with_memory(), e).urgency == {K: Urgency("v", 0.7, {"2": 0.7}, 0.9, "background")}
    assert folded(State(), e).urgency == {}


def test_paths_checked_sets_and_clears_missing() -> None:
    st = folded(with_memory(), ev.PathsChecked(S, ID, {"tests": "test"}))
    assert st.missing == {K: {"tests": "test"}}
    assert folded(st, ev.PathsChecked(S, ID, {})).missing == {}


def test_store_registered() -> None:
    st = folded(State(), ev.StoreRegistered(S, "shared", "/r/.pi/realmem", "git-abc", "/r"))
    assert st.stores == {S: Store(S, "shared", "git-abc", "/r", "/r/.pi/realmem")}


def test_candidate_queued_retried_done() -> None:
    st = folded(State(), ev.CandidateQueued("c1", "git-abc", "/r", {"caption": "x"}, "judge down", "t1"), seq=9)
    assert st.pending == {"c1": Pending("c1", "git-abc", "/r", {"caption": "x"}, "judge down", 0, "t1", 9)}
    st = folded(st, ev.CandidateRetried("c1", "still down", "t2"))
    assert (st.pending["c1"].attempts, st.pending["c1"].reason, st.pending["c1"].next_try) == (1, "still down", "t2")
    assert folded(st, ev.CandidateDone("c1", "add")).pending == {}


def test_candidate_moved_follows_its_project_key() -> None:
    st = folded(State(), ev.CandidateQueued("c1", "path-1", "/r", {"caption": "x", "cwd": "/r"}, "down", "t1"), seq=9)
    st = folded(st, ev.CandidateMoved("c1", "git-abc", "/r2"))
    assert st.pending["c1"] == Pending("c1", "git-abc", "/r2", {"caption": "x", "cwd": "/r2", "project_key": "git-abc"},
                                       "down", 0, "t1", 9)
    assert folded(State(), ev.CandidateMoved("c2", "git-abc", "/r2")) == State()


def test_context_imported_records_the_envelope_time() -> None:
    st = folded(State(), ev.ContextImported("/r/AGENTS.md", "git-abc", "h", 4))
    assert st.imported == {"/r/AGENTS.md": Imported("/r/AGENTS.md", "git-abc", "h", 4, "2026-01-02T00:00:00Z")}


def test_audit_records_change_nothing() -> None:
    st = with_memory()
    assert folded(st, ev.Decided("c1", "git-abc", "add", "R1", [S, ID], {"k": 1})) == st
    assert folded(st, ev.ImportStarted("git-abc", ["/r/AGENTS.md"])) == st
