"""Client for the TypeSafe "System One" judge API (SemIf): ``POST {base}/v1/systemone`` with
named noul / choice / score questions, ``GET {base}/v1/models``, bearer auth (the wire format is
spelled out in ``realmem.fakes.systemone``).  Servers differ in their limits (TypeSafe: choice up
to 255 options, score 2-10 levels; SemIf: choice 2-16 options).

One ``ask`` may carry more questions than a server accepts per request, so questions are sent
in groups of ``max_questions``; a group the server still refuses as too large (422) is halved
until single questions remain.  Raw answers are kept beside the parsed ones because audit
traces store exactly what the judge said.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal, TypeVar

import attrs

from realmem.clients.base import ModelClient
from realmem.clients.errors import EndpointError, RequestTooLarge
from realmem.config import Config
from realmem.logs import get_logger

log = get_logger(__name__)

QuestionType = Literal["noul", "choice", "score"]
Criteria = dict[str, str] | list[str] | None


@attrs.frozen
class Question:
    """One typed question; ``criteria`` is options (choice), levels low->high (score) or None."""

    type: QuestionType = attrs.field(validator=attrs.validators.in_(("noul", "choice", "score")))
    instructions: str
    criteria: Criteria = None

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": self.type, "instructions": self.instructions}
        if self.criteria is not None:
            body["criteria"] = dict(self.criteria) if isinstance(self.criteria, dict) else list(self.criteria)
        return body


@attrs.frozen
class NoulAnswer:
    """P(true) of a yes/no question."""

    p: float
    raw: dict[str, Any] = attrs.field(factory=dict, eq=False, repr=False)


@attrs.frozen
class ChoiceAnswer:
    """The most probable option, every option's probability and the distribution's peakedness."""

    choice: str
    probabilities: dict[str, float]
    confidence: float | None = None
    raw: dict[str, Any] = attrs.field(factory=dict, eq=False, repr=False)

    @property
    def p(self) -> float:
        """Probability of the chosen option (what thresholds compare against)."""
        return self.probabilities.get(self.choice, 0.0)


@attrs.frozen
class ScoreAnswer:
    """Expected level ``score`` = Σ i·p_i over levels "0".."n-1" (low to high)."""

    score: float
    probabilities: dict[str, float]
    legend: dict[str, Any] = attrs.field(factory=dict)
    confidence: float | None = None
    raw: dict[str, Any] = attrs.field(factory=dict, eq=False, repr=False)

    @property
    def levels(self) -> int:
        return len(self.probabilities)

    @property
    def normalized(self) -> float:
        """Score scaled to 0..1, so thresholds do not depend on the number of levels."""
        return self.score / (self.levels - 1) if self.levels > 1 else 0.0


Answer = NoulAnswer | ChoiceAnswer | ScoreAnswer
_A = TypeVar("_A", NoulAnswer, ChoiceAnswer, ScoreAnswer)


class Answers(dict[str, Answer]):
    """Answers by question name, plus the answering model and usage summed over requests."""

    def __init__(self, answers: dict[str, Answer], model: str, usage: dict[str, float],
                 requests: int) -> None:
        super().__init__(answers)
        self.model = model
        self.usage = usage
        self.requests = requests  # HTTP requests made, including ones refused as too large

    def _typed(self, name: str, kind: type[_A]) -> _A:
        answer = self[name]
        if not isinstance(answer, kind):
            raise EndpointError(f"answer {name!r} is a {type(answer).__name__}, not a {kind.__name__}")
        return answer

    def noul(self, name: str) -> NoulAnswer:
        """The answer to ``name``, typed for callers that know it is a noul question."""
        return self._typed(name, NoulAnswer)

    def choice(self, name: str) -> ChoiceAnswer:
        return self._typed(name, ChoiceAnswer)

    def score(self, name: str) -> ScoreAnswer:
        return self._typed(name, ScoreAnswer)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise EndpointError(f"System One answer has a non-numeric {what}: {value!r}")
    return float(value)


def _probabilities(value: Any) -> dict[str, float]:
    if not isinstance(value, dict) or not value:
        raise EndpointError(f"System One answer has no probabilities: {value!r}")
    return {str(k): _number(v, "probability") for k, v in value.items()}


def parse_answer(raw: Any, question: Question | None = None) -> Answer:
    """Turn one raw answer object into its typed form, checking it matches the question."""
    if not isinstance(raw, dict):
        raise EndpointError(f"System One answer is not an object: {raw!r}")
    kind = raw.get("type")
    if question is not None and kind != question.type:
        raise EndpointError(f"System One answered a {question.type} question with type {kind!r}")
    confidence = raw.get("confidence")
    conf = None if confidence is None else _number(confidence, "confidence")
    if kind == "noul":
        return NoulAnswer(p=_number(raw.get("noul"), "noul"), raw=raw)
    if kind == "choice":
        choice = raw.get("choice")
        if not isinstance(choice, str):
            raise EndpointError(f"System One choice answer has no choice: {raw!r}")
        return ChoiceAnswer(choice=choice, probabilities=_probabilities(raw.get("probabilities")),
                            confidence=conf, raw=raw)
    if kind == "score":
        legend = raw.get("legend")
        return ScoreAnswer(score=_number(raw.get("score"), "score"),
                           probabilities=_probabilities(raw.get("probabilities")),
                           legend={str(k): v for k, v in legend.items()} if isinstance(legend, dict) else {},
                           confidence=conf, raw=raw)
    raise EndpointError(f"System One answer has unknown type {kind!r}")


def _add_usage(total: dict[str, float], usage: Any) -> None:
    if isinstance(usage, dict):
        for key, value in usage.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value


class SystemOneClient(ModelClient):
    """Asks a System One server typed questions about a state string."""

    endpoint_name = "SemIf"
    settings_prefix = "semif"

    def __init__(self, url: str, key: str = "", model: str = "", timeout: float = 30.0,
                 max_questions: int = 8, max_options: int = 16, key_advice: str = "") -> None:
        super().__init__(url, key, model, timeout, key_advice)
        if max_questions < 1 or max_options < 2:
            raise ValueError("max_questions must be >= 1 and max_options >= 2")
        self.max_questions = int(max_questions)
        self.max_options = int(max_options)

    @classmethod
    def from_config(cls, cfg: Config) -> SystemOneClient:
        return cls(url=str(cfg.get("semif.url") or ""), key=cfg.secret("semif.key"),
                   model=str(cfg.get("semif.model") or ""), timeout=float(cfg.get("semif.timeout")),
                   max_questions=int(cfg.get("semif.maxQuestions")),
                   max_options=int(cfg.get("semif.maxOptions")), key_advice=cfg.key_advice("semif.key"))

    def ask(self, state: str, questions: dict[str, Question]) -> Answers:
        """Every question answered; raises RequestTooLarge if one question alone is refused."""
        if not questions:
            return Answers({}, self._configured_model, {}, 0)
        model = self.model
        items = list(questions.items())
        answers: dict[str, Answer] = {}
        usage: dict[str, float] = {}
        sent = 0
        for start in range(0, len(items), self.max_questions):
            sent += self._ask_group(model, state, items[start:start + self.max_questions], answers, usage)
        return Answers({name: answers[name] for name in questions}, model, usage, sent)

    def _ask_group(self, model: str, state: str, group: list[tuple[str, Question]],
                   answers: dict[str, Answer], usage: dict[str, float]) -> int:
        """Send one group, halving it on RequestTooLarge; returns the number of requests made."""
        body = {"model": model, "state": state, "questions": {name: q.to_wire() for name, q in group}}
        try:
            reply = self._endpoint.post("/v1/systemone", body)
        except RequestTooLarge:
            if len(group) == 1:
                raise
            half = len(group) // 2
            log.info("systemone.split", questions=len(group), into=[half, len(group) - half])
            return (1 + self._ask_group(model, state, group[:half], answers, usage)
                    + self._ask_group(model, state, group[half:], answers, usage))
        if not isinstance(reply, dict) or not isinstance(reply.get("answers"), dict):
            raise EndpointError(f"System One reply has no answers object ({self._endpoint.url})")
        raw_answers = reply["answers"]
        for name, question in group:
            if name not in raw_answers:
                raise EndpointError(f"System One reply lacks an answer to {name!r} ({self._endpoint.url})")
            answers[name] = parse_answer(raw_answers[name], question)
        _add_usage(usage, reply.get("usage"))
        return 1


_FORGED = re.compile(r"^\s*(?:[-*]\s*)?\[")


def continuation_lines(text: str) -> list[str]:
    """A memory's further lines for a state, indented; a line that itself looks like an
    ``[id]`` line is escaped with a backslash, so a memory cannot forge another option."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        out.append("  " + ("\\" + line.strip() if _FORGED.match(line) else line.strip()))
    return out


def shard_choice(options: dict[str, str], max_options: int, none_key: str = "none") -> list[dict[str, str]]:
    """Split a choice too wide for one question into balanced shards, each offering ``none_key``.

    ``options`` must contain ``none_key``; it keeps its place (first if it came first, else
    last) in every shard.  Returns [] when there is nothing but ``none`` to choose from.
    """
    if max_options < 2:
        raise ValueError("max_options must be at least 2 (one option plus none)")
    if none_key not in options:
        raise ValueError(f"options must include the {none_key!r} option")
    keys = list(options)
    none_first = keys[0] == none_key
    rest = [k for k in keys if k != none_key]
    if not rest:
        return []
    per_shard = max_options - 1
    count = -(-len(rest) // per_shard)
    size, extra = divmod(len(rest), count)
    shards: list[dict[str, str]] = []
    start = 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        chunk = [(k, options[k]) for k in rest[start:end]]
        none = [(none_key, options[none_key])]
        shards.append(dict(none + chunk if none_first else chunk + none))
        start = end
    return shards


def combine_choice(answers: list[ChoiceAnswer], none_key: str = "none") -> ChoiceAnswer:
    """Merge the answers to the shards of one choice into a single answer.

    Approximation (shards are judged independently, so their probabilities are not one
    distribution): each real option keeps its in-shard probability; ``none`` gets the lowest
    ``none`` probability of any shard (the strongest evidence that some option fits).  The
    choice is the highest of these, ties going to a real option, and the probabilities are
    not renormalised so a strong pick keeps the probability its shard gave it.
    """
    if not answers:
        raise ValueError("combine_choice needs at least one answer")
    if len(answers) == 1:
        return answers[0]
    combined: dict[str, float] = {}
    source: dict[str, ChoiceAnswer] = {}
    none_p = 1.0
    none_source = answers[0]
    for answer in answers:
        for key, p in answer.probabilities.items():
            if key == none_key:
                if p <= none_p:
                    none_p, none_source = p, answer
            elif p > combined.get(key, -1.0):
                combined[key], source[key] = p, answer
    best = max(combined, key=lambda k: combined[k], default=None)
    if best is not None and combined[best] >= none_p:
        choice, origin = best, source[best]
    else:
        choice, origin = none_key, none_source
    combined[none_key] = none_p
    raw = {"type": "choice", "combined_from": [a.raw for a in answers]}
    return ChoiceAnswer(choice=choice, probabilities=combined, confidence=origin.confidence, raw=raw)
