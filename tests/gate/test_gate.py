"""The gate's decision rules as pure functions: every rule, with plain answers.

``decide`` hands the answers to the rules as each judge reads them (System One's wire through
``parse_answer``, the chat judge's JSON through ``chatjudge.parse``) and requires one decision,
so every rule here holds for both judges."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import math

from realmem.gate import rules as gate
from realmem.interface.render import reject_reason
from realmem.stores import paths
from realmem.clients import Answer, ChoiceAnswer, NoulAnswer, Question, ScoreAnswer, chatjudge, parse_answer
from realmem.fakes.chat import judge_json
from realmem.fakes.systemone import build_answer

LIMITS = {"coveredBy": 0.6, "conflictWith": 0.6, "mergeWith": 0.6, "importance": 0.35, "durable": 0.5,
          "unsafe": 0.5}
A = gate.Target(("s", "id-a"), "s", ["/r/packages/a"])
B = gate.Target(("s", "id-b"), "s", ["/r"])
OTHER = gate.Target(("p", "id-o"), "p", ["/r"])
NEIGHBOURS = {"A": A, "B": B, "O": OTHER}


def choice(pick: str, p: float) -> ChoiceAnswer:
    rest = (1 - p) / 3
    probs = {k: (p if k == pick else rest) for k in ("none", "A", "B", "O")}
    return ChoiceAnswer(pick, probs, None)


def score(normalized: float, levels: int = 5) -> ScoreAnswer:
    """The expected level ``normalized`` of the range, split between the two levels around it."""
    target = normalized * (levels - 1)
    low = min(math.floor(target), levels - 2)
    probs = [0.0] * levels
    probs[low], probs[low + 1] = 1.0 - (target - low), target - low
    return ScoreAnswer(target, {str(i): p for i, p in enumerate(probs)})


def act(action: str, p: float = 0.9) -> ChoiceAnswer:
    others = (1 - p) / 3
    return ChoiceAnswer(action, {a: (p if a == action else others) for a in ("add", "edit", "merge", "reinforce")})


def answers(**kw):  # type: ignore[no-untyped-def]
    base = {"covered_by": choice("none", 0.9), "conflict_with": choice("none", 0.9),
            "merge_with": choice("none", 0.9), "action": act("add"),
            "importance": score(0.75), "durable": NoulAnswer(0.9), "unsafe": NoulAnswer(0.05)}
    base.update(kw)
    return base


def question(answer: Answer) -> Question:
    if isinstance(answer, ChoiceAnswer):
        return Question("choice", "?", {k: k for k in answer.probabilities})
    if isinstance(answer, ScoreAnswer):
        return Question("score", "?", [f"level {i}" for i in range(answer.levels)])
    return Question("noul", "?")


def read_by(judge: str, answers: dict[str, Answer]) -> dict[str, Answer]:
    """``answers`` sent by System One and read as the gate reads that judge's reply."""
    qs = {name: question(a) for name, a in answers.items()}
    wire = {name: build_answer(qs[name].to_wire(), a.p if isinstance(a, NoulAnswer)
                               else {"probabilities": dict(a.probabilities)}) for name, a in answers.items()}
    if judge == "semif":
        return {name: parse_answer(wire[name], qs[name]) for name in answers}
    return chatjudge.parse(judge_json(wire), qs)


def decide(ans, *, store="s", cand=("/r/packages/a",), user=False, neighbours=NEIGHBOURS,  # type: ignore[no-untyped-def]
           limits=LIMITS):
    """The decision on ``ans`` under each judge; they must agree."""
    made = [gate.decide(read_by(judge, ans), neighbours=neighbours, cand_store=store, cand_abs_paths=list(cand),
                        user_requested=user, limits=limits, overlap=paths.overlap) for judge in ("semif", "chat")]
    assert len({(d.action, d.target, d.rule) for d in made}) == 1, [(d.action, d.rule) for d in made]
    return made[0]


def test_plain_add():
    d = decide(answers())
    assert (d.action, d.rule, d.target) == ("add", "add", None)
    assert d.details.thresholds == LIMITS


def test_confident_covered_by_reinforces():
    d = decide(answers(covered_by=choice("A", 0.8), action=act("add")))
    assert (d.action, d.target, d.rule) == ("reinforce", A.key, "covered-by")


def test_unconfident_covered_by_does_not_reinforce():
    d = decide(answers(covered_by=choice("A", 0.5), action=act("reinforce")))
    assert (d.action, d.rule) == ("add", "reinforce-without-target")


def test_conflict_means_edit_even_when_the_judge_says_add():
    d = decide(answers(conflict_with=choice("A", 0.7)))
    assert (d.action, d.target, d.rule) == ("edit", A.key, "conflict-with")


def test_edit_is_not_gated_by_importance():
    d = decide(answers(conflict_with=choice("A", 0.7), importance=score(0.0), durable=NoulAnswer(0.1)))
    assert d.action == "edit"


def test_merge_requires_confident_merge_with():
    ok = decide(answers(action=act("merge"), merge_with=choice("B", 0.7)))
    assert (ok.action, ok.target, ok.rule) == ("merge", B.key, "merge-with")
    weak = decide(answers(action=act("merge"), merge_with=choice("B", 0.5)))
    assert (weak.action, weak.rule) == ("add", "merge-without-target")


def test_confident_merge_with_without_merge_action_adds():
    d = decide(answers(merge_with=choice("B", 0.9)))
    assert d.action == "add"


def test_scope_differs_from_target_store_adds():
    for ans in (answers(conflict_with=choice("O", 0.9)),
                answers(action=act("merge"), merge_with=choice("O", 0.9))):
        d = decide(ans)
        assert (d.action, d.rule) == ("add", "scope-differs")


SHARED = gate.Target(("shared:/r", "id-s"), "shared:/r", ["/r"])
PERSONAL = gate.Target(("personal:git-abc", "id-p"), "personal:git-abc", ["/r"])
GLOBAL = gate.Target(("global", "id-g"), "global", ["/home/u"])
SCOPED = {"S": SHARED, "P": PERSONAL, "G": GLOBAL}


def covered(pick: str, cand_store: str, cand=("/r/src",)):  # type: ignore[no-untyped-def]
    probs = {k: (0.9 if k == pick else 0.025) for k in ("none", *SCOPED)}
    return decide(answers(covered_by=ChoiceAnswer(pick, probs, None)), neighbours=SCOPED, store=cand_store, cand=cand)


def test_covered_by_a_memory_in_a_wider_store_reinforces_it_instead_of_adding_a_copy():
    # Reinforcing never edits the target, so the scope rule (about Edit) does not apply.
    d = covered("S", PERSONAL.store)
    assert (d.action, d.target, d.rule) == ("reinforce", SHARED.key, "covered-by-other-store")
    assert any("reinforce it" in s and "shared:/r" in s for s in d.steps)
    d = covered("G", PERSONAL.store, cand=())
    assert (d.action, d.target, d.rule) == ("reinforce", GLOBAL.key, "covered-by-other-store")


def test_covered_by_a_memory_fewer_readers_see_adds():
    # A personal note does not reach teammates; a project fact does not reach other projects.
    assert (covered("P", SHARED.store).action, covered("P", SHARED.store).rule) == ("add", "covered-elsewhere")
    assert covered("S", "global", cand=()).rule == "covered-elsewhere"
    assert covered("G", SHARED.store, cand=()).rule == "covered-elsewhere"


def test_covered_across_stores_with_disjoint_paths_adds_rather_than_widening_the_other_store():
    narrow = {**SCOPED, "S": gate.Target(SHARED.key, SHARED.store, ["/r/packages/a"])}
    probs = {k: (0.9 if k == "S" else 0.025) for k in ("none", *narrow)}
    d = decide(answers(covered_by=ChoiceAnswer("S", probs, None)), neighbours=narrow, store=PERSONAL.store,
               cand=["/r/packages/b"])
    assert (d.action, d.rule) == ("add", "scope-differs")


def test_disjoint_paths_turn_edit_and_merge_into_add():
    # "jest in packages/a" vs "vitest in packages/b"
    d = decide(answers(conflict_with=choice("A", 0.9)), cand=("/r/packages/b",))
    assert (d.action, d.rule) == ("add", "disjoint-paths")
    m = decide(answers(action=act("merge"), merge_with=choice("A", 0.9)),
               cand=("/r/packages/b",))
    assert (m.action, m.rule) == ("add", "disjoint-paths")
    # overlapping (project-wide neighbour) stays an edit
    assert decide(answers(conflict_with=choice("B", 0.9)), cand=("/r/packages/b",)).action == "edit"


def test_covered_with_disjoint_paths_widens():
    d = decide(answers(covered_by=choice("A", 0.9)), cand=("/r/packages/b",))
    assert (d.action, d.target, d.rule) == ("widen", A.key, "covered-by-disjoint-paths")


def test_importance_and_durability_gate_add_and_merge():
    d = decide(answers(importance=score(0.25)))
    assert (d.action, d.rule) == ("reject", "not-important")
    d = decide(answers(durable=NoulAnswer(0.2)))
    assert (d.action, d.rule) == ("reject", "not-durable")
    d = decide(answers(action=act("merge"), merge_with=choice("B", 0.9),
                       durable=NoulAnswer(0.2)))
    assert (d.action, d.rule) == ("reject", "not-durable")


def test_user_requested_bypasses_the_gate():
    d = decide(answers(importance=score(0.0), durable=NoulAnswer(0.0)), user=True)
    assert (d.action, d.rule) == ("add", "add")
    assert any("user_requested" in s for s in d.steps)


def test_unsafe_rejects_even_when_user_requested():
    d = decide(answers(unsafe=NoulAnswer(0.8), covered_by=choice("A", 0.9)), user=True)
    assert (d.action, d.rule) == ("reject", "unsafe")
    assert "unsafe" in reject_reason(d.rule, d.details)


def test_pick_of_an_unknown_id_is_ignored():
    d = decide(answers(conflict_with=ChoiceAnswer("ZZ", {"ZZ": 0.99, "none": 0.01})))
    assert d.action == "add"


def test_thresholds_come_from_config(tmp_path):
    from realmem.config import Config
    cfg = Config(tmp_path)
    cfg.set("gate.conflictWith", 0.95)
    limits = gate.thresholds(cfg)
    assert limits["conflictWith"] == 0.95
    d = decide(answers(conflict_with=choice("A", 0.9)), limits=limits)
    assert d.action == "add"


@given(cov=st.floats(0, 1), con=st.floats(0, 1), mer=st.floats(0, 1), imp=st.floats(0, 1),
       dur=st.floats(0, 1), uns=st.floats(0, 1), user=st.booleans(),
       action=st.sampled_from(["add", "edit", "merge", "reinforce"]),
       pick=st.sampled_from(["A", "B", "O", "none"]))
def test_decision_invariants(cov, con, mer, imp, dur, uns, user, action, pick):  # type: ignore[no-untyped-def]
    ans = answers(covered_by=choice(pick, cov), conflict_with=choice(pick, con), merge_with=choice(pick, mer),
                  importance=score(imp), durable=NoulAnswer(dur), unsafe=NoulAnswer(uns),
                  action=act(action, 1.0))
    d = decide(ans, user=user)
    assert d.action in {"add", "edit", "merge", "reinforce", "widen", "reject"}
    # the judge's reading of the floats (a sum, a normalisation) may move them by a rounding error
    imp, dur, uns = d.details.importance, d.details.durable, d.details.unsafe
    if uns >= LIMITS["unsafe"]:
        assert d.action == "reject"
    if d.action in ("edit", "merge", "reinforce", "widen"):
        assert d.target is not None and d.target[0] == "s"  # never across stores
    if d.action in ("add", "merge") and not user:
        assert imp >= LIMITS["importance"] and dur >= LIMITS["durable"]
    if d.action == "reject" and user:
        assert d.rule == "unsafe"
