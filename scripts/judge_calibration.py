#!/usr/bin/env python3
"""Whether the chat judge needs thresholds of its own: the decision each judge reaches.

    .venv/bin/python scripts/judge_calibration.py            # the table of docs/judge-calibration.md
    .venv/bin/python scripts/judge_calibration.py --step 0.05

Each gate rule is swept over the value System One would give (0.00 to 1.00 by 0.01) with every
other answer a plain, confident Add.  System One's answer is the fake's (``build_answer``, read
by ``parse_answer``); the chat judge's is the same distribution rounded to ``--step`` the way
chat models report probabilities (``realmem.fakes.chat.rounded``: 0.9/0.1, 0.6/0.4), read by
``chatjudge.parse``.  Both go through ``rules.decide`` at the thresholds of config.DEFAULTS;
the chat judge also at its threshold moved half a step and a step down and up.  A disagreement is a swept
value where the two reach another action or rule.  The suite's own decision cases run under
each judge in tests/gate/test_remember.py (``every_judge``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

import attrs

from realmem.clients import Answer, Question, chatjudge, parse_answer
from realmem.config import DEFAULTS
from realmem.fakes.chat import judge_json
from realmem.fakes.systemone import build_answer
from realmem.gate import judge, rules
from realmem.stores import paths

A, B = "AZJrPlwafS-aSxwtPk9aaw", "AZJrPmEw1-8Vr0xkmp2Bqw"
STORE = "shared:/r"
TARGETS = {n: rules.Target((STORE, n), STORE, []) for n in (A, B)}
QUESTIONS, _ = judge.questions([judge.Neighbour(n, f"fact {n[:4]}", "content", "shared", []) for n in (A, B)],
                               has_paths=False, max_options=16)
PLAIN = {"covered_by": {"choice": "none", "p": 0.9}, "conflict_with": {"choice": "none", "p": 0.9},
         "merge_with": {"choice": "none", "p": 0.9}, "action": {"choice": "add", "p": 0.9},
         "importance": {"score": 0.75}, "durable": 0.9, "unsafe": 0.05, "scope": {"choice": "shared", "p": 0.9}}


@attrs.frozen
class Rule:
    """One threshold swept: the question it reads and the rest of the case that makes it count."""

    threshold: str
    question: str
    context: Mapping[str, Any] = attrs.field(factory=dict)

    def specs(self, value: float) -> dict[str, Any]:
        swept: Any = {"choice": A, "p": value} if QUESTIONS[self.question].type == "choice" else value
        if self.question == "importance":
            swept = {"score": value}
        return {**PLAIN, **self.context, self.question: swept}


RULES = (Rule("coveredBy", "covered_by", {"action": {"choice": "reinforce", "p": 0.9}}),
         Rule("conflictWith", "conflict_with", {"action": {"choice": "edit", "p": 0.9}}),
         Rule("mergeWith", "merge_with", {"action": {"choice": "merge", "p": 0.9}}),
         Rule("importance", "importance"), Rule("durable", "durable"), Rule("unsafe", "unsafe"))
VALUES = [i / 100 for i in range(101)]


def system_one(specs: Mapping[str, Any]) -> dict[str, Answer]:
    return {n: parse_answer(build_answer(q.to_wire(), specs[n]), q) for n, q in QUESTIONS.items()}


def chat(specs: Mapping[str, Any], step: float) -> dict[str, Answer]:
    """What the chat judge reads when the model reports System One's distribution rounded."""
    wire = {n: build_answer(q.to_wire(), specs[n]) for n, q in QUESTIONS.items()}
    return chatjudge.parse(judge_json(wire, step), dict(QUESTIONS))


def decision(answers: Mapping[str, Answer], limits: Mapping[str, float]) -> tuple[str, str]:
    d = rules.decide(answers, neighbours=TARGETS, cand_store=STORE, cand_abs_paths=[], user_requested=False,
                     limits=limits, overlap=paths.overlap)
    return str(d.action), d.rule


@attrs.frozen
class Sweep:
    """One rule's disagreements at one chat threshold: how many swept values, and their span."""

    rule: str
    chat_threshold: float
    differ: list[float]

    @property
    def span(self) -> str:
        return f"{min(self.differ):.2f}..{max(self.differ):.2f}" if self.differ else "-"


def measure(step: float = 0.1) -> list[Sweep]:
    """For every rule, the chat threshold at the current value, half a step and a step either side."""
    limits = {k: float(DEFAULTS[f"gate.{k}"]) for k in rules.THRESHOLD_KEYS}
    out = []
    for rule in RULES:
        current = limits[rule.threshold]
        for moved in (current + k * step / 2 for k in (-2, -1, 0, 1, 2)):
            chat_limits = {**limits, rule.threshold: round(moved, 6)}
            differ = [v for v in VALUES if decision(system_one(rule.specs(v)), limits)
                      != decision(chat(rule.specs(v), step), chat_limits)]
            out.append(Sweep(rule.threshold, round(moved, 6), differ))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=float, default=0.1, help="the grid the chat model reports on")
    step = parser.parse_args().step
    print(f"step {step}; {len(VALUES)} System One values per rule")
    print(f"{'threshold':<13}{'current':>8}{'chat at':>9}{'differ':>8}  values where they differ")
    for s in measure(step):
        current = DEFAULTS[f"gate.{s.rule}"]
        print(f"{s.rule:<13}{current:>8}{s.chat_threshold:>9}{len(s.differ):>8}  {s.span}")


if __name__ == "__main__":
    main()
