"""The remember gate's decision rules (spec: "Remember path", step 5) as pure functions.

``decide`` takes the judge's answers, the neighbours it was offered, the candidate's store
and paths, and the thresholds from config, and returns ``Decision(action, target, rule,
details)``.  No I/O: every rule is testable with plain values.

Rules, in order:

1. ``unsafe``: P(unsafe) >= gate.unsafe rejects the candidate.
2. ``covered-by``: a confident covered_by reinforces that neighbour; reinforcing never edits
   it, so this holds across stores too, when the neighbour reaches everyone the candidate
   would (``covered-by-other-store``: a personal fact covered by a shared or global one).  A
   neighbour that reaches fewer readers (a shared fact covered by a personal one: teammates
   would never see it) leaves the candidate to be added (``covered-elsewhere``).  If the
   neighbour's paths are disjoint from the candidate's, its paths are widened in its own store
   (``covered-by-disjoint-paths``); across stores that would edit it, so the candidate is
   added instead.
3. ``conflict-with``: a confident conflict_with edits that neighbour, whatever the judge's
   action (Edit takes precedence over Add).
4. ``merge-with``: the judge's action Merge with a confident merge_with merges; Merge without
   one falls back to Add (``merge-without-target``).
5. An Edit or Merge whose target is in another store becomes an Add (``scope-differs``);
   one whose target's paths do not overlap the candidate's becomes an Add (``disjoint-paths``).
6. Add and Merge need importance >= gate.importance and P(durable) >= gate.durable, unless the
   user asked for the memory (``user-requested`` bypass).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from realmem.clients import Answer, ChoiceAnswer, NoulAnswer, ScoreAnswer
from realmem.config import Config
from realmem.events.trace import GateDetails, Pick
from realmem.events.types import Action, Key
from realmem.stores.project import store_kind

NONE = "none"
THRESHOLD_KEYS = ("coveredBy", "conflictWith", "mergeWith", "importance", "durable", "unsafe")


@attrs.frozen
class Target:
    """A neighbour the judge may pick: where it lives and its absolute path patterns."""

    key: Key
    store: str
    abs_paths: list[str]


@attrs.frozen
class Decision:
    action: Action  # add | edit | merge | reinforce | widen | reject
    target: Key | None
    rule: str
    details: GateDetails
    steps: list[str]  # how the rules got there, for the trace


def reaches(target_store: str, cand_store: str) -> bool:
    """Whether a memory in ``target_store`` is seen by everyone a memory in ``cand_store`` would
    be: the same store, or a candidate that is personal (only this user, in this project)."""
    return target_store == cand_store or store_kind(cand_store) == "personal"


def thresholds(cfg: Config) -> dict[str, float]:
    return {k: float(cfg[f"gate.{k}"]) for k in THRESHOLD_KEYS}


def _pick(answers: Mapping[str, Answer], name: str, neighbours: Mapping[str, Target], threshold: float) -> Pick:
    """The neighbour chosen (or none), its probability, and whether it clears ``threshold``."""
    a = answers.get(name)
    if not isinstance(a, ChoiceAnswer) or a.choice == NONE or a.choice not in neighbours:
        return Pick(None, a.p if isinstance(a, ChoiceAnswer) else 0.0, False)
    return Pick(a.choice, a.p, a.p >= threshold)


def _noul(answers: Mapping[str, Answer], name: str, default: float) -> float:
    a = answers.get(name)
    return a.p if isinstance(a, NoulAnswer) else default


def _importance(answers: Mapping[str, Answer]) -> float | None:
    a = answers.get("importance")
    return a.normalized if isinstance(a, ScoreAnswer) else None


def _action(answers: Mapping[str, Answer]) -> str:
    a = answers.get("action")
    return a.choice.lower() if isinstance(a, ChoiceAnswer) else "add"


def decide(answers: Mapping[str, Answer], *, neighbours: Mapping[str, Target], cand_store: str,
           cand_abs_paths: list[str], user_requested: bool, limits: Mapping[str, float],
           overlap: Callable[[list[str], list[str]], bool]) -> Decision:
    """The decision for one judged candidate; ``overlap`` is ``paths.overlap`` (injected so
    this module stays free of filesystem code)."""
    t = dict(limits)
    details = GateDetails(
        judge_action=_action(answers), covered_by=_pick(answers, "covered_by", neighbours, t["coveredBy"]),
        conflict_with=_pick(answers, "conflict_with", neighbours, t["conflictWith"]),
        merge_with=_pick(answers, "merge_with", neighbours, t["mergeWith"]),
        importance=_importance(answers), durable=_noul(answers, "durable", 1.0), unsafe=_noul(answers, "unsafe", 0.0),
        user_requested=user_requested, thresholds=t)
    r = _Rules(details, [], neighbours, cand_store, cand_abs_paths, overlap)
    cov, con, mer, action = details.covered_by, details.conflict_with, details.merge_with, details.judge_action

    if details.unsafe >= t["unsafe"]:
        r.steps.append(f"P(unsafe)={details.unsafe:.2f} >= {t['unsafe']}")
        return r.decision(Action.REJECT, None, "unsafe")
    if cov.confident and cov.id is not None:
        return r.covered(cov)

    if con.confident and con.id is not None:
        r.steps.append(f"conflict_with {con.id} p={con.p:.2f} >= {t['conflictWith']}: Edit over Add")
        return r.onto(Action.EDIT, con.id, "conflict-with")
    if action == "merge":
        if mer.confident and mer.id is not None:
            r.steps.append(f"action Merge with merge_with {mer.id} p={mer.p:.2f} >= {t['mergeWith']}")
            return r.onto(Action.MERGE, mer.id, "merge-with")
        r.steps.append(f"action Merge but merge_with not confident (p={mer.p:.2f} < {t['mergeWith']})")
        return r.gated_add("merge-without-target")
    if action in ("edit", "reinforce"):
        r.steps.append(f"action {action.capitalize()} without a confident target pick")
        return r.gated_add(f"{action}-without-target")
    return r.gated_add("add")


@attrs.define
class _Rules:
    """One candidate's decision under way: what the rules read, and the steps taken so far."""

    details: GateDetails
    steps: list[str]
    neighbours: Mapping[str, Target]
    cand_store: str
    cand_abs_paths: list[str]
    overlap: Callable[[list[str], list[str]], bool]

    def decision(self, act: Action, target: Key | None, rule: str) -> Decision:
        return Decision(act, target, rule, self.details, self.steps)

    def gated_add(self, rule: str) -> Decision:
        gate = _gate(self.details, self.steps)
        return self.decision(Action.REJECT, None, gate) if gate is not None else self.decision(Action.ADD, None, rule)

    def disjoint(self, target: Target) -> bool:
        return bool(self.cand_abs_paths and target.abs_paths) and not self.overlap(self.cand_abs_paths,
                                                                                    target.abs_paths)

    def covered(self, cov: Pick) -> Decision:
        """Rule 2: a confident covered_by reinforces or widens that neighbour, or leaves an Add."""
        assert cov.id is not None
        target, cand_store = self.neighbours[cov.id], self.cand_store
        self.steps.append(f"covered_by {cov.id} p={cov.p:.2f} >= {self.details.thresholds['coveredBy']}")
        if not reaches(target.store, cand_store):
            self.steps.append(f"the covering memory is in {target.store}, which does not reach everyone a memory "
                              f"in {cand_store} would: Add")
            return self.gated_add("covered-elsewhere")
        if self.disjoint(target):
            if target.store != cand_store:
                self.steps.append(f"target paths do not overlap the candidate's, and widening them would edit a "
                                  f"memory in {target.store}: Add")
                return self.gated_add("scope-differs")
            self.steps.append("target paths do not overlap the candidate's: widen them")
            return self.decision(Action.WIDEN, target.key, "covered-by-disjoint-paths")
        if target.store != cand_store:
            self.steps.append(f"the covering memory is in {target.store}, not the candidate's {cand_store}: "
                              "reinforce it (reinforcing does not edit it), no copy is added")
            return self.decision(Action.REINFORCE, target.key, "covered-by-other-store")
        return self.decision(Action.REINFORCE, target.key, "covered-by")

    def onto(self, act: Action, nid: str, rule: str) -> Decision:
        """Rules 3-6 for an Edit or Merge onto neighbour ``nid``: an Add when it is another
        store's or another subject's; a Merge passes the importance and durability gate."""
        target = self.neighbours[nid]
        if target.store != self.cand_store:
            self.steps.append(f"target store {target.store} != candidate store {self.cand_store}: Add instead")
            return self.gated_add("scope-differs")
        if self.disjoint(target):
            self.steps.append("target paths do not overlap the candidate's: not the same subject, Add instead")
            return self.gated_add("disjoint-paths")
        if act == Action.MERGE:
            gate = _gate(self.details, self.steps)
            if gate is not None:
                return self.decision(Action.REJECT, None, gate)
        return self.decision(act, target.key, rule)


def _gate(details: GateDetails, steps: list[str]) -> str | None:
    """The rule that rejects an Add/Merge for importance or durability, or None."""
    t = details.thresholds
    if details.user_requested:
        steps.append("user_requested: importance and durability not checked")
        return None
    importance, durable = details.importance, details.durable
    if importance is not None and importance < t["importance"]:
        steps.append(f"importance {importance:.2f} < {t['importance']}")
        return "not-important"
    if durable < t["durable"]:
        steps.append(f"P(durable)={durable:.2f} < {t['durable']}")
        return "not-durable"
    return None

