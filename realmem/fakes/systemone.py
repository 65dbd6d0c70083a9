"""Fake SemIf / TypeSafe System One server speaking the exact wire format of the real one.

``POST /v1/systemone`` takes ``{"model", "state", "questions": {name: {"type": "noul" | "choice"
| "score", "instructions", "criteria"}}}`` (criteria: option key -> description for choice, in
order; the level descriptions low to high for score) and answers ``{"model", "answers": {name:
...}, "usage"}``: ``{"type": "noul", "noul": P(true)}``, ``{"type": "choice", "choice",
"probabilities", "confidence"}`` or ``{"type": "score", "score", "legend", "probabilities",
"confidence"}``.  ``GET /v1/models`` lists ``{"models": [{"name", "description",
"release_date"}]}``.  Auth is ``Authorization: Bearer KEY``; errors are 401 (bad key), 422
(invalid or too large) and 503 with ``retry-after`` while loading.

Requests are validated strictly (unknown fields, wrong types, option and level counts,
questions per request) so client drift shows up as a 422, as it would against the real
server.  Answers come from scripts, by question name:

- a spec dict is sticky: it answers every request until replaced;
- a list of specs is a queue: one spec per request, then back to the default;
- a callable ``(state, question) -> spec`` (in-process only) is sticky.

Spec forms: ``{"noul": p}``; ``{"choice": key, "p": p, "confidence": c}`` or
``{"probabilities": {key: p}}``; ``{"score": t}`` with ``t`` the target normalised score
0..1, or ``{"probabilities": [p0, p1, ...]}``; a bare number for noul/score; ``{"raw": {...}}``
sent verbatim.  A scripted choice that is not among the offered options is answered as
"none" when offered (so a sharded choice behaves like the real judge).  Unscripted questions
get the deterministic heuristic of ``realmem.fakes.heuristic`` (or a 400 when heuristic mode
is off).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

from realmem.fakes.base import FakeServer, Reply, ScriptError, not_found
from realmem.fakes.heuristic import Judgement

Spec = dict[str, Any] | float
SpecSource = Spec | list[Spec] | Callable[[str, dict[str, Any]], Spec]

QUESTION_FIELDS = {"type", "instructions", "criteria"}
REQUEST_FIELDS = {"model", "state", "questions"}


def _peakedness(probs: list[float]) -> float:
    """1 - normalised entropy: 0 for uniform, 1 for certain (the API's confidence)."""
    if len(probs) < 2:
        return 1.0
    entropy = -sum(p * math.log(p) for p in probs if p > 0)
    return round(max(0.0, 1.0 - entropy / math.log(len(probs))), 6)


def _prob(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ScriptError(f"{value!r} is not a probability")
    return float(value)


def build_answer(question: dict[str, Any], spec: Spec) -> dict[str, Any]:
    """The exact answer JSON for ``question`` following a script ``spec``."""
    qtype = question["type"]
    if isinstance(spec, dict) and "raw" in spec:
        raw = spec["raw"]
        if not isinstance(raw, dict):
            raise ScriptError("a raw answer must be a JSON object")
        return raw
    if isinstance(spec, int | float) and not isinstance(spec, bool):
        spec = {qtype: spec}
    if not isinstance(spec, dict):
        raise ScriptError(f"unreadable script {spec!r}")
    other = {"noul", "choice", "score"} - {qtype}
    if other & spec.keys():
        raise ScriptError(f"script {spec!r} does not fit a {qtype} question")
    extra = {"temperature": 1.0, "option_mass": 0.97}
    if qtype == "noul":
        return {"type": "noul", "noul": _prob(spec.get("noul", spec.get("p"))), **extra}
    if qtype == "choice":
        return {"type": "choice", **_choice(list(question["criteria"]), spec), **extra}
    return {"type": "score", **_score(list(question["criteria"]), spec), **extra}


def _choice(options: list[str], spec: dict[str, Any]) -> dict[str, Any]:
    if "probabilities" in spec:
        given = {str(k): _prob(v) for k, v in spec["probabilities"].items()}
        total = sum(given.get(k, 0.0) for k in options) or 1.0
        probs = {k: given.get(k, 0.0) / total for k in options}
    else:
        choice = str(spec.get("choice"))
        if choice not in options:
            if "none" not in options:
                raise ScriptError(f"choice {choice!r} is not among the options {options}")
            choice = "none"
        p = _prob(spec.get("p", 0.9))
        rest = (1.0 - p) / (len(options) - 1)
        probs = {k: (p if k == choice else rest) for k in options}
    choice = max(options, key=lambda k: probs[k])
    confidence = spec.get("confidence", _peakedness(list(probs.values())))
    return {"choice": choice, "probabilities": probs, "confidence": confidence}


def _score(levels: list[str], spec: dict[str, Any]) -> dict[str, Any]:
    n = len(levels)
    if "probabilities" in spec:
        given = spec["probabilities"]
        values = [given[str(i)] for i in range(n)] if isinstance(given, dict) else list(given)
        if len(values) != n:
            raise ScriptError(f"score script has {len(values)} level probabilities for {n} levels")
        total = sum(_prob(v) for v in values) or 1.0
        probs = [v / total for v in values]
    else:
        target = _prob(spec.get("score")) * (n - 1)
        low = min(math.floor(target), n - 2)
        upper = target - low
        probs = [0.0] * n
        probs[low], probs[low + 1] = 1.0 - upper, upper
    return {
        "score": sum(i * p for i, p in enumerate(probs)),
        "legend": {str(i): text for i, text in enumerate(levels)},
        "probabilities": {str(i): p for i, p in enumerate(probs)},
        "confidence": spec.get("confidence", _peakedness(probs)),
    }


class FakeSystemOne(FakeServer):
    """System One judge: GET /v1/models, POST /v1/systemone."""

    kind = "semif"

    def __init__(self, *, key: str = "", port: int = 0, heuristic: bool = True,
                 models: list[str] | None = None, max_questions: int = 64, max_options: int = 16,
                 max_levels: int = 10) -> None:
        super().__init__(key=key, port=port)
        self.heuristic = heuristic
        self.models = list(models) if models is not None else ["fake-semif"]
        self.max_questions = max_questions
        self.max_options = max_options
        self.max_levels = max_levels
        self._scripts: dict[str, Spec | deque[Spec] | Callable[[str, dict[str, Any]], Spec]] = {}

    def settable(self) -> set[str]:
        return super().settable() | {"heuristic", "models", "max_questions", "max_options", "max_levels"}

    def script(self, payload: Any) -> None:
        """``{question name: spec | [spec, ...] | callable}``; see the module docstring."""
        if not isinstance(payload, dict):
            raise ScriptError("a System One script is {question name: spec}")
        with self._lock:
            for name, source in payload.items():
                self._scripts[name] = deque(source) if isinstance(source, list) else source

    def _reset_script(self) -> None:
        self._scripts.clear()

    def handle(self, method: str, path: str, body: Any) -> Reply:
        if method == "GET" and path == "/v1/models":
            return Reply(200, {"models": [{"name": m, "description": "realmem fake System One judge",
                                           "release_date": "2026-01-01"} for m in self.models]})
        if method == "POST" and path == "/v1/systemone":
            problem = self._validate(body)
            if problem:
                return Reply(422, {"detail": problem})
            answers = {name: self.answer(name, body["state"], q) for name, q in body["questions"].items()}
            words = len(str(body["state"]).split()) + sum(len(str(q)) // 4 for q in body["questions"].values())
            return Reply(200, {"model": body["model"], "answers": answers,
                               "usage": {"input_tokens": words, "output_tokens": len(answers)}})
        return not_found(path)

    def _validate(self, body: Any) -> str | None:
        if not isinstance(body, dict):
            return "the request body must be a JSON object"
        if body.keys() - REQUEST_FIELDS:
            return f"unexpected fields: {sorted(body.keys() - REQUEST_FIELDS)}"
        if REQUEST_FIELDS - body.keys():
            return f"missing fields: {sorted(REQUEST_FIELDS - body.keys())}"
        if body["model"] not in self.models:
            return f"unknown model {body['model']!r}"
        if not isinstance(body["state"], str | dict | list):
            return "state must be a string, object or array"
        questions = body["questions"]
        if not isinstance(questions, dict) or not questions:
            return "questions must be a non-empty object"
        if len(questions) > self.max_questions:
            return f"too many questions: {len(questions)} > {self.max_questions}"
        for name, q in questions.items():
            problem = self._validate_question(q)
            if problem:
                return f"questions.{name}: {problem}"
        return None

    def _validate_question(self, q: Any) -> str | None:
        if not isinstance(q, dict):
            return "a question must be an object"
        if q.keys() - QUESTION_FIELDS:
            return f"unexpected fields: {sorted(q.keys() - QUESTION_FIELDS)}"
        qtype, criteria = q.get("type"), q.get("criteria")
        if qtype not in ("noul", "choice", "score"):
            return f"unknown type {qtype!r}"
        instructions = q.get("instructions")
        if not isinstance(instructions, str | dict | list) or not instructions:
            return "instructions are required"
        if qtype == "choice":
            if not isinstance(criteria, dict) or not all(isinstance(v, str) for v in criteria.values()):
                return "choice criteria must map option keys to descriptions"
            if len(criteria) < 2:
                return "a choice needs at least 2 options"
            if len(criteria) > self.max_options:
                return f"too many options: {len(criteria)} > {self.max_options}"
        elif qtype == "score":
            if not isinstance(criteria, list) or not all(isinstance(v, str) for v in criteria):
                return "score criteria must be a list of level descriptions"
            if not 2 <= len(criteria) <= self.max_levels:
                return f"a score needs 2 to {self.max_levels} levels, got {len(criteria)}"
        elif criteria is not None and not (isinstance(criteria, dict)
                                           and all(isinstance(v, str) for v in criteria.values())):
            return "noul criteria must map true/false to descriptions"
        return None

    def answer(self, name: str, state: Any, question: dict[str, Any]) -> dict[str, Any]:
        """The answer JSON to one wire question: its script, else the heuristic.  Public so the
        chat fake's judge mode answers from the same scripts (``FakeChat(judge=...)``)."""
        with self._lock:
            source = self._scripts.get(name)
            spec: Spec | None = None
            if isinstance(source, deque):
                spec = source.popleft() if source else None
                if not source:
                    del self._scripts[name]
            elif not callable(source) and source is not None:
                spec = source
        if callable(source):  # outside the lock: a callable may block one request, not all
            spec = source(state if isinstance(state, str) else str(state), question)
        if spec is None:
            if not self.heuristic:
                raise ScriptError(f"no script for question {name!r}")
            spec = Judgement(state if isinstance(state, str) else str(state)).answer(name, question)
        return build_answer(question, spec)
