"""The typed decision trace: the gate writes it, ``Decided`` stores it with a version, one
function renders it; a trace in the old untyped shape (a log written before the schema)
still loads and renders as it did; actions serialise exactly as the bare strings did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from realmem.app import Realmem
from realmem.events import log as evlog
from realmem.events import trace as tr
from realmem.events import types as ev
from realmem.events.types import Action
from realmem.gate.remember import remember
from realmem.interface.render import outcome_text, render_trace
from realmem.stores import ids
from realmem.write.attached import open_attached
from helpers.cli import ok

FIXTURE = Path(__file__).parent.parent / "fixtures" / "decided_v0.json"
JEST = ("Unit tests use jest", "Run `pnpm test` to run the jest unit tests.")
VITEST = ("Unit tests use vitest", "Run `pnpm test` to run the vitest unit tests.")


def old_record() -> dict[str, Any]:
    """A Decided event as the previous release wrote it (an Edit with judge, neighbours,
    urgency and a fallback rewrite), and the text its own render_trace printed for it."""
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def decided(app: Realmem) -> list[ev.Decided]:
    return [e.event for e in evlog.read(app.conn, 0) if isinstance(e.event, ev.Decided)]


def test_gate_trace_round_trips_through_decided_and_renders(home: Path, repo: Path, servers):
    s1, _, chat = servers
    with open_attached(home, repo) as app:
        base = remember(app, *JEST, paths=["packages/a"]).memory
        assert base is not None
        s1.script({"conflict_with": {"choice": ids.short(base.id), "p": 0.9}})
        chat.down()
        out = remember(app, *VITEST, paths=["packages/a"])
        assert out.action == Action.EDIT and out.trace is not None
        stored = decided(app)[-1]
    assert stored.trace["version"] == tr.TRACE_VERSION
    loaded = tr.load(stored.trace)
    assert loaded is not None
    # Everything the gate recorded comes back; only the seq is learnt after the event is written.
    assert out.trace.decided_seq is not None and loaded.decided_seq is None
    assert loaded == attrs.evolve(out.trace, decided_seq=None)
    assert isinstance(loaded.decision, tr.DecisionTrace) and isinstance(loaded.decision.details, tr.GateDetails)
    assert loaded.decision.details.conflict_with == tr.Pick(ids.short(base.id), 0.9, True)
    assert isinstance(loaded.rewrite, tr.RewriteTrace) and loaded.rewrite.used_fallback
    assert all(isinstance(n, tr.NeighbourTrace) for n in loaded.neighbours or [])
    text = render_trace(loaded)
    assert text == render_trace(out.trace)
    for needle in ("Embedding: ok", f"*{ids.short(base.id)}", "Judge: fake-semif", "Decision: edit · rule conflict-with",
                   "thresholds: coveredBy=", "Path urgency:", "Rewrite (edit, deterministic fallback",
                   "+Unit tests use vitest"):
        assert needle in text, needle
    assert render_trace(out.trace, outcome_text(out)).endswith("\n\n" + outcome_text(out))


def test_an_old_untyped_trace_loads_and_renders_as_before(home: Path, repo: Path):
    rec = old_record()
    assert "version" not in rec["payload"]["trace"]
    with open_attached(home, repo) as app:
        app.emit([ev.from_payload(rec["type"], rec["payload"])])  # a log holding the old shape
        stored = decided(app)[-1]
    t = tr.load(stored.trace)
    assert t is not None and t.version == 0
    # The rules' inputs moved from the flat decision into decision.details.
    assert t.decision is not None and t.decision.details is not None
    assert t.decision.details.judge_action == "edit" and t.decision.details.thresholds["coveredBy"] == 0.6
    assert t.decision.details.conflict_with.confident
    assert render_trace(t) == rec["rendered"]


def test_audit_renders_an_old_trace(home: Path, repo: Path):
    rec = old_record()
    target = rec["payload"]["target"]
    with open_attached(home, repo) as app:
        app.emit([ev.from_payload(rec["type"], rec["payload"])])
    p = ok(home, repo, "audit", target[1])
    assert "\n".join("        " + line for line in rec["rendered"].splitlines()) in p.stdout
    assert '"candidate"' not in p.stdout  # rendered, not dumped as JSON


def test_a_trace_that_is_not_the_gates_is_left_alone():
    # Consolidation records its own evidence in Decided.trace.
    assert tr.load({"answers": {}, "raw": {}, "older": "abc"}) is None


def test_minimal_and_newer_traces_load():
    # An older release may lack sections; a newer one may add keys this one does not know.
    t = tr.load({"version": 1, "candidate": {"id": "c1", "caption": "x", "content": "y"}, "future": {"a": 1}})
    assert t is not None and t.candidate.caption == "x" and t.decision is None
    assert "Candidate: x" in render_trace(t)
    v0 = tr.load({"candidate": {"caption": "x"}, "decision": {"action": "queue", "rule": "lock-busy", "reason": "busy"},
                  "lock": {"timeout": 5, "holder": {"pid": 7, "host": "h", "held_for": 1.5}}})
    assert v0 is not None and v0.lock == tr.LockTrace(5.0, tr.LockHolder(7, "h", 1.5))
    assert v0.decision is not None and v0.decision.details is None
    assert "Decision: queue · rule lock-busy" in render_trace(v0) and "reason: busy" in render_trace(v0)


# --- actions ------------------------------------------------------------------------------------

@pytest.mark.parametrize("action", list(Action))
def test_actions_serialise_as_the_bare_strings_did(action: Action):
    e = ev.Decided("c1", None, action, "rule", None, {})
    payload = ev.to_payload(e)
    assert type(payload["action"]) is str and payload["action"] == action.value
    assert json.dumps(payload) == json.dumps({**payload, "action": action.value})
    back = ev.from_payload("decided", json.loads(json.dumps(payload)))
    assert back == e and back.action is action
    assert f"{action}" == str(action) == action.value  # messages and tables print the plain word


def test_an_old_log_replays_to_the_identical_payload():
    payload = old_record()["payload"]
    event = ev.from_payload("decided", payload)
    assert isinstance(event, ev.Decided) and event.action is Action.EDIT
    assert ev.to_payload(event) == payload


def test_an_unknown_action_still_loads():
    event = ev.from_payload("decided", {"candidate_id": "c", "project_key": None, "action": "from-the-future",
                                        "rule": "r", "target": None, "trace": {}})
    assert isinstance(event, ev.Decided) and event.action == "from-the-future"
    assert ev.to_payload(event)["action"] == "from-the-future"
