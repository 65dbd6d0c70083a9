"""The chat judge: the System One question set asked of a chat-completions model.

Used when no System One endpoint is set.  One request carries the state and every question;
the model must answer strict JSON ``{"answers": {name: {"probabilities": {option: p}}}}``
where the options are a choice's keys, a score's levels ``"0".."n-1"`` (low to high) or
``"true"``/``"false"`` for a noul question.  The reply is validated against the questions and
mapped into the very answer shapes System One returns (``NoulAnswer``, ``ChoiceAnswer``,
``ScoreAnswer``), so the decision rules and the trace read it unchanged.  Anything else (no
JSON, a missing question or option, a probability outside 0..1, a distribution that does not
sum to about 1) is an ``EndpointError``: the gate queues the candidate with that reason.
"""

from __future__ import annotations

import json
import math
from typing import Any

from realmem.clients.chat import ChatModel, extract_json_object
from realmem.clients.errors import EndpointError
from realmem.clients.systemone import Answer, Answers, ChoiceAnswer, NoulAnswer, Question, ScoreAnswer

MAX_OPTIONS = 255  # a chat model takes every option of a choice in one question: no shards

# Self-reported probabilities are rounded by the model; a sum further than this from 1 means
# the model did not give one distribution.
SUM_TOLERANCE = 0.05

SYSTEM = ("You judge candidate facts for a coding agent's long-term memory.  For every question, give a "
          "probability for every option listed for it, each between 0 and 1, summing to 1 per question.  "
          "Answer with one JSON object and nothing else: "
          '{"answers": {"<question>": {"probabilities": {"<option>": <p>, ...}}, ...}}.')


def options(question: Question) -> list[str]:
    """The option keys a question's answer must give a probability for."""
    if question.type == "noul":
        return ["true", "false"]
    if question.type == "score":
        return [str(i) for i in range(len(question.criteria or []))]
    return list(question.criteria or {})


def prompt(state: str, questions: dict[str, Question]) -> list[dict[str, Any]]:
    asked = {}
    for name, q in questions.items():
        if q.type == "choice":
            described: Any = dict(q.criteria or {})
        elif q.type == "score":
            described = {str(i): level for i, level in enumerate(q.criteria or [])}
        else:
            described = {"true": "yes", "false": "no"}
        asked[name] = {"question": q.instructions, "options": described}
    user = "STATE\n" + state + "\n\nQUESTIONS\n" + json.dumps(asked, ensure_ascii=False, indent=1)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def _peakedness(probs: list[float]) -> float:
    """1 - normalised entropy, System One's confidence: 0 for uniform, 1 for certain."""
    if len(probs) < 2:
        return 1.0
    entropy = -sum(p * math.log(p) for p in probs if p > 0)
    return max(0.0, 1.0 - entropy / math.log(len(probs)))


def _distribution(name: str, raw: Any, keys: list[str]) -> dict[str, float]:
    if not isinstance(raw, dict) or not isinstance(raw.get("probabilities"), dict):
        raise EndpointError(f"the chat judge's answer to {name!r} has no probabilities object")
    given = raw["probabilities"]
    missing = [k for k in keys if k not in given]
    if missing:
        raise EndpointError(f"the chat judge's answer to {name!r} lacks options {missing}")
    probs: dict[str, float] = {}
    for k in keys:
        v = given[k]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or not 0 <= v <= 1:
            raise EndpointError(f"the chat judge gave {name!r} option {k!r} the probability {v!r}, not one in 0..1")
        probs[k] = float(v)
    total = sum(probs.values())
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise EndpointError(f"the chat judge's probabilities for {name!r} sum to {total:.3g}, not 1")
    return {k: p / total for k, p in probs.items()}


def parse(reply: dict[str, Any], questions: dict[str, Question]) -> dict[str, Answer]:
    """The typed answers, or EndpointError naming what is wrong."""
    answers = reply.get("answers")
    if not isinstance(answers, dict):
        raise EndpointError("the chat judge's reply has no answers object")
    out: dict[str, Answer] = {}
    for name, q in questions.items():
        if name not in answers:
            raise EndpointError(f"the chat judge's reply lacks an answer to {name!r}")
        probs = _distribution(name, answers[name], options(q))
        raw = {"type": q.type, "probabilities": probs}
        if q.type == "noul":
            out[name] = NoulAnswer(p=probs["true"], raw={**raw, "noul": probs["true"]})
        elif q.type == "choice":
            choice = max(probs, key=lambda k: probs[k])
            out[name] = ChoiceAnswer(choice, probs, _peakedness(list(probs.values())), raw=raw)
        else:
            levels = list(q.criteria or [])
            out[name] = ScoreAnswer(sum(i * probs[str(i)] for i in range(len(levels))), probs,
                                    {str(i): t for i, t in enumerate(levels)}, _peakedness(list(probs.values())),
                                    raw=raw)
    return out


class ChatJudge:
    """Asks the questions of a chat model in one request; ``name`` is ``chat:<model>``."""

    def __init__(self, chat: ChatModel) -> None:
        self._chat = chat
        self.name = "chat"

    def ask(self, state: str, questions: dict[str, Question]) -> Answers:
        text, model, usage = self._chat.completion(prompt(state, questions), temperature=0.0)
        self.name = f"chat:{model}"
        try:
            reply = extract_json_object(text)
        except EndpointError:
            raise EndpointError(f"the chat judge's reply holds no JSON object: {text[:120]!r}") from None
        return Answers(parse(reply, questions), model, usage, 1)

    def close(self) -> None:
        self._chat.close()
