"""Recall's second stage: a judge says which of the top candidates answer the question.

Similarity cannot tell "about this project, but no fact covers it" from "covered": a near miss
scores like a hit on every embedding and BM25 signal (docs/recall.md).  So recall asks a judge
one choice question over its best ``CANDIDATES`` (their ids plus ``none``), the way the gate asks
``covered_by``: what it gives at least ``RELEVANT_P`` is a match, the other candidates are weak
matches.  The judge is System One when ``semif.url`` is set (``recall.relevance`` = ``semif``,
the default); with ``chat`` it is the chat judge (clients/chatjudge.py) whenever a chat model is
reachable, System One otherwise.  The chat model is never asked by default: every check costs
the user one request of their own model's tokens.  A choice wider than ``semif.maxOptions`` is
split into shards for System One; a chat model takes every option at once.  Verdicts are kept
per (judge, query, candidate texts) for the process, so asking again costs nothing.  Any
endpoint error (503, 422, a timeout, a malformed answer) returns None: recall keeps the rule of
the first stage and loses nothing.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import attrs

from realmem.clients.chat import chat_client
from realmem.clients import chatjudge
from realmem.clients.errors import Error
from realmem.clients.systemone import Question, SystemOneClient, combine_choice, continuation_lines, shard_choice
from realmem.events.types import Key
from realmem.logs import get_logger
from realmem.stores import ids

if TYPE_CHECKING:
    from realmem.app import Realmem
    from realmem.projections.state import Memory

log = get_logger(__name__)

CANDIDATES = 10  # the first stage's best, offered to the judge (10 + none fit SemIf's 16 options)
RELEVANT_P = 0.3  # the judge's probability that makes a candidate a match
QUESTION = "answers"
NONE = "none"
INSTRUCTIONS = ("A coding agent asked the question above. Which of the memories listed answers it, that is, "
                "states what the agent needs to know to act on the question? Pick none when no memory does, "
                "even if some are about the same project or topic.")
CACHE_SIZE = 512
TIMEOUT = 5.0  # seconds: recall waits for System One at most this long, then keeps its own rule
# A chat model answers in seconds, not milliseconds; past this a recall keeps its own rule rather
# than hold the agent up (a remember may wait the whole rewriter.timeout: it runs in the background).
CHAT_TIMEOUT = 20.0


@attrs.frozen
class Verdict:
    relevant: frozenset[Key]
    trace: dict[str, Any]


_cache: OrderedDict[tuple, Verdict] = OrderedDict()
_clients: dict[tuple, SystemOneClient] = {}


@attrs.frozen
class Judge:
    """The judge a check asks: ``ask(state, questions)``, its cache identity, its option limit."""
    asker: Any
    kind: str  # "semif" or "chat"
    identity: tuple
    max_options: int


def judge(app: Realmem) -> Judge | None:
    """The chat judge when ``recall.relevance`` is ``chat`` and a chat model is reachable, else
    System One when ``semif.url`` is set and the check is not off, else None."""
    mode = app.config["recall.relevance"]
    if mode == "chat":
        chat = chat_client(app).limited(CHAT_TIMEOUT)
        if chat.configured:
            # The configured names, not the resolved model: resolving asks the endpoint.
            ident = ("chat", getattr(chat, "url", type(chat).__name__), app.config["rewriter.model"])
            return Judge(chatjudge.ChatJudge(chat), "chat", ident, chatjudge.MAX_OPTIONS)
        chat.close()
    if mode == "off" or not app.config["semif.url"]:
        return None
    client = _client(app)
    return Judge(client, "semif", ("semif", client.url, app.config["semif.model"]), max(2, client.max_options))


def state(query: str, candidates: Sequence[Memory]) -> str:

    lines = [f"Question: {' '.join(query.split())}", "", "Memories:"]
    for m in candidates:
        first, _, rest = m.content.partition("\n")
        lines.append(f"[{ids.short(m.id)}] {m.caption} — {first}")
        lines += continuation_lines(rest)
    return "\n".join(lines)


def check(chosen: Judge, query: str, candidates: Sequence[Memory]) -> Verdict | None:
    """Which of ``candidates`` (best first, at most CANDIDATES) ``chosen`` says answer ``query``
    (``judge``); None when there is nothing to check or the judge could not answer."""
    candidates = list(candidates)[:CANDIDATES]
    if not candidates:
        _close(chosen)
        return None
    key = (chosen.identity, " ".join(query.split()), tuple((m.id, m.hash) for m in candidates))
    cached = _cache.get(key)
    if cached is not None:
        _close(chosen)
        _cache.move_to_end(key)
        return attrs.evolve(cached, trace=cached.trace | {"cached": True})
    verdict = _ask(chosen, query, candidates)
    if verdict is not None:
        _cache[key] = verdict
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return verdict


def _ask(chosen: Judge, query: str, candidates: list[Memory]) -> Verdict | None:
    """One request to ``chosen``; None when it could not answer."""
    by_short = {ids.short(m.id): (m.store, m.id) for m in candidates}
    options = {ids.short(m.id): m.caption[:160] or ids.short(m.id) for m in candidates} | \
        {NONE: "none of these memories answers the question"}
    shards = shard_choice(options, chosen.max_options, NONE)
    questions = {QUESTION if i == 0 else f"{QUESTION}__{i}": Question("choice", INSTRUCTIONS, part)
                 for i, part in enumerate(shards)}
    started = time.perf_counter()
    try:
        answers = chosen.asker.ask(state(query, candidates), questions)
        combined = combine_choice([answers.choice(name) for name in questions], NONE)
    except Error as exc:
        log.warning("recall.relevance_failed", judge=chosen.kind, error=type(exc).__name__,
                    detail=str(exc)[:200], candidates=len(candidates))
        return None
    finally:
        _close(chosen)
    latency = round((time.perf_counter() - started) * 1000, 1)
    picked = {s for s, p in combined.probabilities.items() if s != NONE and p >= RELEVANT_P}
    name = f"{chosen.kind}:{answers.model}"
    trace = {"judge": name, "question": INSTRUCTIONS, "options": list(options),
             "probabilities": {s: round(p, 4) for s, p in combined.probabilities.items()},
             "relevant": sorted(picked), "threshold": RELEVANT_P, "latency_ms": latency,
             "requests": answers.requests, "usage": answers.usage, "cached": False}
    if "total_tokens" in answers.usage:
        trace["tokens"] = int(answers.usage["total_tokens"])
    log.info("recall.relevance", judge=name, candidates=len(candidates), relevant=len(picked),
             latency_ms=latency, requests=answers.requests)
    return Verdict(frozenset(by_short[s] for s in picked if s in by_short), trace)


def _close(chosen: Judge) -> None:
    """A chat judge's client is the call's own; System One's client is kept for the process."""
    if chosen.kind == "chat":
        with suppress(Error):
            chosen.asker.close()


def _client(app: Realmem) -> SystemOneClient:
    """One client per settings, kept for the process: its "(auto)" model is resolved once."""

    cfg = app.config
    sig = tuple(str(cfg[k]) for k in ("semif.url", "semif.model", "semif.maxQuestions", "semif.maxOptions",
                                      "semif.timeout")) + (cfg.secret("semif.key"),)
    c = _clients.get(sig)
    if c is None:
        c = _clients[sig] = SystemOneClient(
            url=str(cfg["semif.url"]), key=cfg.secret("semif.key"), model=str(cfg["semif.model"] or ""),
            timeout=min(TIMEOUT, float(cfg["semif.timeout"])), max_questions=int(cfg["semif.maxQuestions"]),
            max_options=int(cfg["semif.maxOptions"]), key_advice=cfg.key_advice("semif.key"))
    return c
