"""The remember path (spec: "Remember path (surprise gate)").

``remember`` runs every step: safety scan, exact duplicate (reinforce / widen), neighbours
(embedding KNN + BM25, fused with RRF), the SemIf judge, the decision rules of ``gate``, the
Edit/Merge rewrite, the atomic write, and background embedding / urgency.  Each decision is
recorded as a ``Decided`` event with its full trace (raw answers, thresholds, rule fired), so
``realmem audit`` explains it; a dry run writes nothing at all.

Concurrency: the plan (embedding, judge, rewrite) is made without the write lock; the write
then takes the lock and, if any memory in the visible stores changed since planning, plans
again under the lock before writing.  So concurrent remembers never write duplicates, and
the lock is held across network calls only when a race actually happened.

Candidates the judge cannot handle now (unreachable, not configured, or the write lock busy
for longer than gate.lockWaitSeconds) are queued as ``CandidateQueued`` events, per project,
and retried with exponential backoff by the worker or by hand (``retry``).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs

from realmem.gate import availability, rules as gate, judge, safety
from realmem.read import embedder, search
from realmem.stores import frames, ids, paths
from realmem.write import gitignore, memories, observe
from realmem.app import Realmem, RealmemError
from realmem.clients import Answer, EndpointError, EndpointUnavailable, ScoreAnswer
from realmem.events import log
from realmem.events import types as ev
from realmem.events.trace import (AnswerTrace, CandidateTrace, DecisionTrace, DuplicateTrace, EmbeddingTrace,
                                  Finding, GateTrace, JudgeTrace, LockHolder, LockTrace, MemoryText, NeighbourSources,
                                  NeighbourTrace, RewriteTrace, SafetyTrace, UrgencyTrace, dump)
from realmem.events.types import Action, Key, content_hash
from realmem.storage.lock import LeaseLock, LockTimeout
from realmem.stores.project import store_kind
from realmem.projections import index, tables
from realmem.projections.state import Memory
from realmem.projections.urgency import TIER_SHOWN, urgency_key_of, urgency_tier
from realmem.logs import get_logger
from realmem.clients.chat import chat_client
from realmem.gate.rewrite import rewrite
from realmem.clients import chatjudge
from realmem.clients.chatjudge import ChatJudge
from realmem.projections import queries

logger = get_logger("realmem.gate.remember")

# How long a retry waits for a candidate another process is processing before skipping it.
CLAIM_WAIT_SECONDS = 1.0

MEMORY_EVENTS = (ev.MemoryAdded, ev.MemoryEdited, ev.MemoryForgotten, ev.MemoryMoved, ev.FileObserved,
                 ev.MemoryApproved)


@attrs.frozen
class Note:
    """Something the caller should know beside the decision: ``redacted`` (``detail``: what),
    ``shared-ignored`` (git ignores the shared store), ``unwritten`` (``detail``: why the fact
    file could not be written)."""

    kind: str
    detail: str = ""


@attrs.define
class Outcome:
    """What the gate did with one candidate, as values; ``interface.render.outcome_text`` words
    it for the model and the user."""

    action: Action
    memory: Memory | None  # the memory written/reinforced (None for reject/refuse/queue)
    notes: list[Note]
    trace: GateTrace | None  # None only for a queued candidate that failed before the gate ran
    queued: bool = False
    rule: str = ""       # the rule that decided (a queue's kind: no-judge, lock-busy, ...)
    reason: str = ""     # why it was refused or queued, or the error that dropped or kept it
    store: str = ""      # the store the candidate was placed in
    caption: str = ""    # the caption a dry run would store
    dry_run: bool = False
    failed: int = 0      # queued after this many refusals in a row: no longer retried automatically


@attrs.define
class Candidate:
    caption: str
    content: str
    scope: str | None
    abs_paths: list[str]
    user_requested: bool
    source: str
    candidate_id: str
    cwd: str

    def payload(self, project_key: str | None) -> dict[str, Any]:
        return {"caption": self.caption, "content": self.content, "scope": self.scope, "paths": self.abs_paths,
                "user_requested": self.user_requested, "source": self.source, "cwd": self.cwd,
                "project_key": project_key}


@attrs.define
class Plan:
    action: Action
    rule: str
    store: str
    stored_paths: list[str]
    target: Key | None = None
    caption: str = ""
    content: str = ""
    new_paths: list[str] | None = None
    reason: str = ""          # queue reason
    retry_after: float | None = None
    permanent: bool = False   # queued after a refusal that retrying alone will not change
    urgency: ScoreAnswer | None = None


class _Queue(Exception):
    """``permanent``: the endpoint refused the request itself (unknown model, 401, a 422 that
    splitting cannot fix); retrying helps only once a setting changes."""

    def __init__(self, reason: str, retry_after: float | None = None, *, permanent: bool = False,
                 rule: str = "judge-unavailable") -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.permanent = permanent
        self.rule = rule


# --- small helpers ------------------------------------------------------------------------------

def _shared_ignored(app: Realmem) -> bool:
    """Whether git ignores the shared store now (re-checked whenever an ignore source changed)."""
    if app.project is None:
        return False
    try:
        return gitignore.cached_check(app.project.root, app.home).ignored
    except Exception as exc:  # never fail a remember over a warning
        logger.warning("gitignore.check_failed", error=str(exc))
        return False


def _scope_label(store: str) -> str:
    return store_kind(store)


def next_try(app: Realmem, attempts: int, retry_after: float | None) -> str:
    base = float(app.config["queue.baseBackoffSeconds"])
    cap = float(app.config["queue.maxBackoffSeconds"])
    delay = min(cap, base * (2 ** attempts))
    if retry_after is not None:
        delay = min(cap, max(delay, retry_after))
    t = datetime.now(timezone.utc) + timedelta(seconds=delay)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _project_key(app: Realmem) -> str | None:
    return app.project.key if app.project is not None else None


def thresholds_trace(app: Realmem) -> dict[str, Any]:
    t: dict[str, Any] = dict(gate.thresholds(app.config))
    t.update({"neighbors": int(app.config["gate.neighbors"]), "judgeNeighbors": int(app.config["gate.judgeNeighbors"]),
              "rrfK": int(app.config["gate.rrfK"]), "pathNotes.high": float(app.config["pathNotes.high"]),
              "pathNotes.mid": float(app.config["pathNotes.mid"])})
    return t


# --- the public API -----------------------------------------------------------------------------

def remember(app: Realmem, caption: str, content: str, *, scope: str | None = None, paths: list[str] | None = None,
             user_requested: bool = False, source: str = "remember", dry_run: bool = False,
             candidate_id: str | None = None) -> Outcome:
    caption, content = memories.validate(caption, content)
    abs_paths = []
    for raw in paths or []:
        try:
            abs_paths.append(_normalize(app, raw))
        except Exception as exc:  # the error reaches the agent and the logs: never with a secret in it
            raise RealmemError(f"bad path {safety.mask_secrets(raw)!r}: {exc}") from None
    cand = Candidate(caption, content, scope, list(dict.fromkeys(abs_paths)), bool(user_requested), source,
                     candidate_id or ids.new_id(), str(app.cwd))
    trace = GateTrace(candidate=CandidateTrace(cand.candidate_id, caption, content, scope, cand.abs_paths,
                                               cand.user_requested, source, candidate_id is not None),
                      dry_run=dry_run, thresholds=thresholds_trace(app))
    notes: list[Note] = []

    # 1. Safety scan: the text, then the paths (committed with it, shown in path notes).
    result, s_caption, s_content = safety.scan_memory(caption, content, redact=bool(app.config["safety.redact"]))
    in_paths = safety.scan_paths([raw.strip() for raw in paths or []])
    reason = result.reason()
    if result.ok and not in_paths.ok:  # a path is never redacted: refused whatever safety.redact says
        result, reason = in_paths, "refused: a path " + in_paths.reason().removeprefix("refused: ")
    trace.safety = SafetyTrace(result.ok, reason, [Finding(f.category, f.kind) for f in result.findings])
    if not result.ok:
        # Never store a secret: the trace keeps the candidate with secrets masked.
        r_caption, r_content = safety.mask_memory(caption, content, result) if result is not in_paths \
            else (caption, content)
        trace.candidate.caption, trace.candidate.content = r_caption, r_content
        trace.candidate.paths = [safety.mask_found(p, in_paths) for p in cand.abs_paths]
        trace.decision = DecisionTrace(Action.REFUSE, "safety", reason=reason)
        if not dry_run:
            events: list[ev.Event] = [ev.Decided(cand.candidate_id, _project_key(app), Action.REFUSE, "safety", None,
                                                 dump(trace))]
            if candidate_id is not None and _is_pending(app, candidate_id):
                events.append(ev.CandidateDone(candidate_id, Action.REFUSE))
            app.emit(events)
        return Outcome(Action.REFUSE, None, notes, trace, reason=reason, dry_run=dry_run)
    if result.findings:  # redacted: the trace (kept in the event log) holds only the redacted text
        cand.caption, cand.content = s_caption, s_content
        trace.candidate.caption, trace.candidate.content = s_caption, s_content
        notes.append(Note("redacted", result.reason()))

    snap = log.last_seq(app.conn)
    plan = _plan_or_queue(app, cand, trace)
    if dry_run:
        return _dry_outcome(app, cand, plan, trace, notes)
    if plan.action == Action.QUEUE:
        return _queue(app, cand, plan, trace, notes)
    try:
        with app.write_lease():
            if plan.action in (Action.EDIT, Action.MERGE, Action.WIDEN, Action.REINFORCE) and plan.target is not None:
                observe.scan_stores(app, [plan.target[0]])  # a hand edit must not be overwritten
            if _changed_since(app, snap):
                trace.replanned = True
                plan = _plan_or_queue(app, cand, trace)
            outcome = _execute(app, cand, plan, trace, notes)
    except LockTimeout as exc:
        trace.lock = LockTrace(float(app.config["gate.lockWaitSeconds"]), _safe_holder(exc))
        plan = Plan(Action.QUEUE, "lock-busy", "", [], reason="the write lock is busy")
        outcome = _queue(app, cand, plan, trace, notes)
    return outcome


def retry(app: Realmem, *, force: bool = False, progress: Callable[[int, int], None] | None = None) -> list[Outcome]:
    """Process this project's queued candidates that are due (``force``: all of them).

    Each candidate is claimed first (a lease named after it), then checked to be still
    queued, so two processes retrying at once (two ``realmem retry``, or one beside the
    worker) never process one candidate twice: the loser skips it."""
    key = _project_key(app)
    rows = queries.pending_for(app.conn, key)
    now = log.now_iso()
    due = [cid for cid, next_try_at in rows if force or next_try_at <= now]
    out: list[Outcome] = []
    for i, cid in enumerate(due, 1):
        o = _retry_claimed(app, cid, force=force, now=now)
        if o is not None:
            out.append(o)
        if progress:
            progress(i, len(due))
    return out


# A candidate the judge refused this many times in a row for a reason retrying cannot change
# is marked failed: kept, shown with its reason, retried only by `realmem retry`.
FAILED_AFTER = 3
FAILED_PREFIX = "failed: "

# A candidate whose project is gone is rescheduled with the usual backoff this many times
# (the checkout may come back: a remounted disk, a branch switched back), then dropped.
GONE_ATTEMPTS = 8


def back_off_or_drop(app: Realmem, project_key: str | None, reason: str, cands: list[tuple[str, int]]) -> None:
    """Queued candidates (id, attempts so far) that cannot be tried now for ``reason``: each is
    rescheduled with backoff, or dropped with the reason recorded after GONE_ATTEMPTS, so it
    never stays due (a worker would retry it in a tight loop)."""
    events: list[ev.Event] = []
    for cid, attempts in cands:
        if attempts + 1 >= GONE_ATTEMPTS:
            events.append(ev.CandidateDone(cid, f"dropped: {reason}"))
            logger.warning("retry.dropped", project_key=project_key, candidate=cid, reason=reason,
                           attempts=attempts + 1)
        else:
            events.append(ev.CandidateRetried(cid, reason, next_try(app, attempts + 1, None)))
            logger.info("retry.rescheduled", project_key=project_key, candidate=cid, reason=reason,
                        attempts=attempts + 1)
    app.emit(events)  # queue bookkeeping is table-only: no lease needed


def _retry_claimed(app: Realmem, cid: str, *, force: bool, now: str) -> Outcome | None:
    claim = LeaseLock(app.db_path, f"candidate:{cid}")
    try:
        claim.acquire(CLAIM_WAIT_SECONDS)
    except LockTimeout:
        logger.info("retry.claimed_elsewhere", candidate=cid, project_key=_project_key(app))
        return None
    try:
        row = queries.pending_entry(app.conn, cid)
        if row is None or not (force or row[1] <= now):
            return None  # done or rescheduled by whoever held the claim before us
        p = json.loads(row[0])
        try:
            return remember(app, p["caption"], p["content"], scope=p.get("scope"), paths=p.get("paths") or [],
                            user_requested=bool(p.get("user_requested")), source=p.get("source") or "remember",
                            candidate_id=cid)
        except RealmemError as exc:
            # The candidate can never be written (e.g. its scope no longer exists): drop it.
            app.emit([ev.CandidateDone(cid, f"error: {exc}")])
            return Outcome(Action.REJECT, None, [], None, rule="dropped", reason=str(exc))
        except Exception as exc:
            # A bug must not leave the candidate due at once: the worker would retry it in a
            # tight loop.  It backs off like any failed attempt, with the error recorded.
            logger.exception("retry.failed", candidate=cid, project_key=_project_key(app))
            attempts = queries.pending_attempts(app.conn, cid)
            if attempts is not None:
                app.emit([ev.CandidateRetried(cid, f"error: {type(exc).__name__}: {exc}",
                                              next_try(app, attempts + 1, None))])
            return Outcome(Action.QUEUE, None, [], None, queued=True, rule="kept-after-error", reason=str(exc))
    finally:
        claim.release()


# --- planning -----------------------------------------------------------------------------------

def _normalize(app: Realmem, raw: str) -> str:
    return paths.normalize_input(raw, cwd=app.cwd, home=frames.user_home())


def _plan_or_queue(app: Realmem, cand: Candidate, trace: GateTrace) -> Plan:
    try:
        return _plan(app, cand, trace)
    except _Queue as q:
        return Plan(Action.QUEUE, q.rule, "", [], reason=q.reason, retry_after=q.retry_after,
                    permanent=q.permanent)


def _plan(app: Realmem, cand: Candidate, trace: GateTrace) -> Plan:
    store, stored = memories.place(app, cand.scope, cand.abs_paths)
    h = content_hash(cand.caption, cand.content)
    _placed(trace, store, stored).hash = h

    # 2. Exact duplicate.
    dup = _exact_duplicate(app, h)
    if dup is not None:
        return _plan_duplicate(app, cand, dup, stored, trace)

    # 3. Neighbours.
    shown = _neighbours(app, cand, h, trace, max(0, int(app.config["gate.judgeNeighbors"])))
    for n in (trace.neighbours or [])[: len(shown)]:
        n.judged = True

    # 4. Judge.
    combined = _ask_judge(app, cand, shown, stored, trace)
    if combined is None:  # no judge, and the user asked for this memory
        trace.decision = DecisionTrace(Action.ADD, "user-requested-no-judge",
                                       steps=["no judge reachable; the user asked for this memory"])
        return Plan(Action.ADD, "user-requested-no-judge", store, stored, None, cand.caption, cand.content)
    store, stored = _judged_place(app, cand, combined, trace)
    urgency = _urgency(app, combined, stored, trace)

    # 5. Decision.
    d = _decide(app, cand, shown, combined, store, stored)
    trace.decision = DecisionTrace(d.action, d.rule, list(d.target) if d.target else None, steps=d.steps,
                                   details=d.details)
    plan = Plan(d.action, d.rule, store, stored, d.target, cand.caption, cand.content, urgency=urgency)
    if d.action in (Action.EDIT, Action.MERGE):
        _rewrite(app, plan, cand, trace)  # 6.
    elif d.action == Action.WIDEN:
        target = app.memory(d.target)  # type: ignore[arg-type]
        assert target is not None
        plan.new_paths = memories.union_paths(target.paths, stored, target.store)
    return plan


def _placed(trace: GateTrace, store: str, stored: list[str]) -> CandidateTrace:
    c = trace.candidate
    c.store, c.scope_used, c.stored_paths = store, _scope_label(store), stored
    return c


def _plan_duplicate(app: Realmem, cand: Candidate, dup: Memory, stored: list[str], trace: GateTrace) -> Plan:
    """An exact duplicate reinforces the memory, or widens its paths by the candidate's new ones."""
    trace.duplicate = DuplicateTrace(ids.short(dup.id), dup.store, dup.caption)
    if cand.abs_paths:
        try:
            dup_frame = memories.edit_paths_from_input(app, (dup.store, dup.id), cand.abs_paths)
        except RealmemError as exc:
            trace.duplicate.widen_impossible = str(exc)
            dup_frame = []
        dup_abs = frames.absolute(app, dup.store, dup.paths)
        new = [p for p, a in zip(dup_frame, frames.absolute(app, dup.store, dup_frame))
               if not any(paths.matches(q, a) for q in dup_abs)]
        if new:
            widened = memories.union_paths(dup.paths, new, dup.store)
            trace.decision = DecisionTrace(Action.WIDEN, "exact-duplicate-new-paths", [dup.store, dup.id],
                                           paths=widened)
            return Plan(Action.WIDEN, "exact-duplicate-new-paths", dup.store, stored, (dup.store, dup.id),
                        dup.caption, dup.content, widened)
    trace.decision = DecisionTrace(Action.REINFORCE, "exact-duplicate", [dup.store, dup.id])
    return Plan(Action.REINFORCE, "exact-duplicate", dup.store, stored, (dup.store, dup.id))


def _ask_judge(app: Realmem, cand: Candidate, shown: list[Memory], stored: list[str], trace: GateTrace
               ) -> Mapping[str, Answer] | None:
    """The judge's answers, combined over shards; None when no judge is configured and the user
    asked for the memory.  Raises ``_Queue`` when the judge cannot answer now."""
    cfg = app.config
    client: Any = judge.client(cfg)
    name, max_options = "semif", int(cfg["semif.maxOptions"])
    if client is None and cfg["judge.fallback"] == "chat":
        chat = chat_client(app)
        if chat.configured:
            # One request per candidate (chatjudge.MAX_OPTIONS: no shards).
            client, name, max_options = ChatJudge(chat), "chat", chatjudge.MAX_OPTIONS
    if client is None:
        trace.judge = JudgeTrace(configured=False)
        if cand.user_requested:
            return None
        raise _Queue(availability.missing(cfg), rule="no-judge")
    jn = [judge.Neighbour(ids.short(m.id), m.caption, m.content, _scope_label(m.store), m.paths) for m in shown]
    has_paths = judge.specific_paths(stored)
    state = judge.build_state(cand.caption, cand.content, stored if has_paths else [], cand.scope, jn)
    qs, shards = judge.questions(jn, has_paths=has_paths, max_options=max_options)
    label = "the SemIf judge" if name == "semif" else "the chat judge"
    try:
        with _timed(trace, "judge_s"):
            answers = client.ask(state, qs)
    except EndpointUnavailable as exc:
        trace.judge = JudgeTrace(configured=True, judge=name, error=str(exc))
        raise _Queue(f"{label} is unreachable", exc.retry_after) from None
    except EndpointError as exc:
        trace.judge = JudgeTrace(configured=True, judge=name, error=str(exc))
        raise _Queue(f"{label} refused the request ({exc})", permanent=True) from None
    finally:
        client.close()
    combined = judge.combine(answers, shards)
    trace.judge = JudgeTrace(
        configured=True, judge=name if name == "semif" else client.name, usage=dict(answers.usage),
        model=answers.model, requests=answers.requests, state=state,
        questions={name: q.to_wire() for name, q in qs.items()},
        raw={name: judge.raw_answer(a) for name, a in answers.items()},
        answers={name: AnswerTrace(**judge.answer_summary(a)) for name, a in combined.items()},
    )
    return combined


def _judged_place(app: Realmem, cand: Candidate, combined: Mapping[str, Answer], trace: GateTrace
                  ) -> tuple[str, list[str]]:
    """The store and stored paths once the judge has answered: an explicit scope wins over the judge's."""
    scope_ans = combined.get("scope")
    final_scope = cand.scope
    if final_scope is None and scope_ans is not None and getattr(scope_ans, "choice", None) in judge.SCOPE_STORE_KIND:
        final_scope = judge.SCOPE_STORE_KIND[scope_ans.choice]  # type: ignore[union-attr]
        if final_scope != "global" and app.project is None:
            final_scope = "global"
    store, stored = memories.place(app, final_scope, cand.abs_paths)
    _placed(trace, store, stored).scope_source = "explicit" if cand.scope else "judge"
    return store, stored


def _urgency(app: Realmem, combined: Mapping[str, Answer], stored: list[str], trace: GateTrace) -> ScoreAnswer | None:
    """The judge's path urgency, when the memory has specific paths to be shown for."""
    urgency = combined.get("path_urgency")
    if not (isinstance(urgency, ScoreAnswer) and judge.specific_paths(stored)):
        return None
    tier = urgency_tier(urgency.score, app.config)
    trace.urgency = UrgencyTrace(urgency.score, tier, dict(urgency.probabilities), urgency.confidence,
                                 TIER_SHOWN[tier])
    return urgency


def _decide(app: Realmem, cand: Candidate, shown: list[Memory], combined: Mapping[str, Answer], store: str,
            stored: list[str]) -> gate.Decision:
    by_short = {ids.short(m.id): m for m in shown}
    targets = {s: gate.Target((m.store, m.id), m.store, frames.absolute(app, m.store, m.paths)) for s, m in by_short.items()}
    return gate.decide(combined, neighbours=targets, cand_store=store, cand_abs_paths=frames.absolute(app, store, stored),
                       user_requested=cand.user_requested, limits=gate.thresholds(app.config), overlap=paths.overlap)


def _rewrite(app: Realmem, plan: Plan, cand: Candidate, trace: GateTrace) -> None:
    """Rewrite the Edit/Merge target with the new fact, keeping its id."""
    target = app.memory(plan.target)  # type: ignore[arg-type]
    assert target is not None
    with _timed(trace, "rewrite_s"):
        rewritten = rewrite(app, plan.action, target, cand.caption, cand.content)
    plan.caption, plan.content = rewritten.caption, rewritten.content
    plan.new_paths = (memories.union_paths(target.paths, plan.stored_paths, target.store)
                      if judge.specific_paths(plan.stored_paths) else list(target.paths))
    old_text = f"{target.caption}\n\n{target.content}\n"
    new_text = f"{plan.caption}\n\n{plan.content}\n"
    trace.rewrite = RewriteTrace(
        mode=plan.action, used_fallback=rewritten.used_fallback, fallback_reason=rewritten.fallback,
        old=MemoryText(target.caption, target.content, target.paths),
        new=MemoryText(plan.caption, plan.content, plan.new_paths),
        diff="".join(difflib.unified_diff(old_text.splitlines(True), new_text.splitlines(True),
                                          f"a/{ids.short(target.id)}", f"b/{ids.short(target.id)}")),
    )


def _exact_duplicate(app: Realmem, h: str) -> Memory | None:
    stores = app.visible_stores()
    rows = app.conn.execute(
        f"SELECT {tables.MEMORY_COLS} FROM memories WHERE hash=? AND quarantined IS NULL AND store IN "
        f"({','.join('?' * len(stores))})", (h, *stores)).fetchall()
    found = [tables.memory_from_row(r) for r in rows]
    found.sort(key=lambda m: (stores.index(m.store), m.id))
    return found[0] if found else None


# The candidate's rarest words the BM25 neighbour search looks for: a near-duplicate shares
# them, while its common words match most of a large store and FTS5 would score every match.
BM25_TERMS = 8


def _neighbours(app: Realmem, cand: Candidate, h: str, trace: GateTrace, shown: int) -> list[Memory]:
    """The fused neighbours, all in the trace; the first ``shown`` of them read whole."""
    cfg = app.config
    limit = max(1, min(254, int(cfg["gate.neighbors"])))
    stores = app.visible_stores()
    emb = EmbeddingTrace(configured=cfg.embedding_enabled())
    vector = None
    if emb.configured:
        fp = index.active_fingerprint(app.conn)
        emb.cached = bool(fp and index.cache_get(app.conn, h, fp) is not None)
        try:
            with _timed(trace, "embed_s"):
                vector = embedder.embed_document(app, cand.caption, cand.content, h)
            emb.status = "ok"
            emb.dims = len(vector) if vector else None
        except (EndpointUnavailable, EndpointError) as exc:
            emb.status = "down"
            emb.error = str(exc)
            emb.note = "embedder unavailable: BM25 neighbours only"
    else:
        emb.status = "not-configured"
        emb.note = "no embedder configured: BM25 neighbours only"
    trace.embedding = emb
    text = f"{cand.caption}\n{cand.content}"
    bm, kn = search.neighbour_lists(app.conn, app.reader, text, vector, stores, limit, BM25_TERMS)
    hits = search.fuse([bm], [kn] if kn else [], k=int(cfg["gate.rrfK"]), limit=limit)
    rows, kept = [], []
    # The trace lists every neighbour; only the judge's few are read whole.
    found = queries.neighbour_rows(app.conn, [hit.key for hit in hits])
    for hit in hits:
        row = found.get(hit.key)
        if row is None or row[2] is not None:  # gone meanwhile, or quarantined
            continue
        caption, paths, _ = row
        kept.append(hit.key)
        rows.append(NeighbourTrace(ids.short(hit.key[1]), hit.key[0], _scope_label(hit.key[0]), caption, paths,
                                   hit.cosine, hit.cos_rank, hit.bm25, hit.bm25_rank, hit.rrf))
    trace.neighbours = rows
    trace.neighbour_sources = NeighbourSources(len(bm), len(kn))
    whole = tables.memories_by_key(app.conn, kept[:shown])
    return [whole[k] for k in kept[:shown] if k in whole]


def _changed_since(app: Realmem, snap: int) -> bool:
    stores = set(app.visible_stores())
    for env in log.read(app.conn, snap):
        e = env.event
        if isinstance(e, MEMORY_EVENTS):
            touched = {k[0] for k in e.keys()}
            if touched & stores:
                return True
    return False


# --- executing ----------------------------------------------------------------------------------

def _execute(app: Realmem, cand: Candidate, plan: Plan, trace: GateTrace, notes: list[Note]) -> Outcome:
    if plan.action == Action.QUEUE:
        return _queue(app, cand, plan, trace, notes)
    pk = _project_key(app)
    pending = _is_pending(app, cand.candidate_id)
    done = [ev.CandidateDone(cand.candidate_id, plan.action)] if pending else []
    target = list(plan.target) if plan.target else None
    decided = app.emit([ev.Decided(cand.candidate_id, pk, plan.action, plan.rule, target, dump(trace))])
    seq = decided[-1].seq
    trace.decided_seq = seq

    if plan.action == Action.REJECT:
        if done:
            app.emit(done)
        return Outcome(Action.REJECT, None, notes, trace, rule=plan.rule, store=plan.store)

    if plan.action == Action.REINFORCE:
        assert plan.target is not None
        app.emit([ev.Reinforced(plan.target[0], plan.target[1], seq), *done])
        return Outcome(Action.REINFORCE, app.memory(plan.target), notes, trace, rule=plan.rule, store=plan.store)

    if plan.action == Action.ADD:
        mem_id = ids.new_id()
        caption, content = memories.validate(plan.caption, plan.content)
        fields = app.new_fields(plan.store, mem_id, caption, content, plan.stored_paths)
        events: list[ev.Event] = [ev.MemoryAdded(plan.store, mem_id, fields, cand.source, seq)]
        if plan.urgency is not None:
            events.append(ev.UrgencyJudged(plan.store, mem_id, urgency_key_of(fields.content, fields.paths),
                                           plan.urgency.score, dict(plan.urgency.probabilities),
                                           plan.urgency.confidence, "remember",
                                           {"path_urgency": dict(plan.urgency.raw)}))
        app.emit([*events, *done])
        m = app.memory((plan.store, mem_id))
        assert m is not None
        _written_notes(app, m, notes)
        return Outcome(Action.ADD, m, notes, trace, rule=plan.rule, store=plan.store)

    # edit | merge | widen: rewrite in place, same id.
    assert plan.target is not None
    widen = plan.action == Action.WIDEN
    m = memories.edit(app, plan.target, caption=None if widen else plan.caption,
                      content=None if widen else plan.content, stored_paths=plan.new_paths,
                      reason=plan.action.value, decision=seq, extra=done)
    _written_notes(app, m, notes)
    return Outcome(plan.action, m, notes, trace, rule=plan.rule, store=plan.store)


def _queue(app: Realmem, cand: Candidate, plan: Plan, trace: GateTrace, notes: list[Note]) -> Outcome:
    pk = _project_key(app)
    attempts = queries.pending_attempts(app.conn, cand.candidate_id)
    trace.decision = attrs.evolve(trace.decision or DecisionTrace(), action=Action.QUEUE, rule=plan.rule,
                                  reason=plan.reason)
    failed = plan.permanent and attempts is not None and attempts + 1 >= FAILED_AFTER
    if attempts is not None:
        events: list[ev.Event] = [ev.CandidateRetried(
            cand.candidate_id, f"{FAILED_PREFIX}{plan.reason}" if failed else plan.reason,
            queries.NEVER if failed else next_try(app, attempts + 1, plan.retry_after))]
    else:
        events = [ev.Decided(cand.candidate_id, pk, Action.QUEUE, plan.rule, None, dump(trace)),
                  ev.CandidateQueued(cand.candidate_id, pk, cand.cwd, cand.payload(pk), plan.reason,
                                     next_try(app, 0, plan.retry_after))]
    app.emit(events)  # queue bookkeeping is table-only: it never waits for the lease lock
    return Outcome(Action.QUEUE, None, notes, trace, queued=True, rule=plan.rule, reason=plan.reason,
                   failed=FAILED_AFTER if failed else 0)


def _is_pending(app: Realmem, cid: str) -> bool:
    return queries.is_pending(app.conn, cid)


def _written_notes(app: Realmem, m: Memory, notes: list[Note]) -> None:
    """What to say about a memory just written: git ignores its shared store, or it is recorded
    but its store could not be written (read-only, full), which whoever asked must hear (the
    model over rpc or MCP sees only the outcome's text)."""
    if app.project is not None and m.store == app.project.shared_store and _shared_ignored(app):
        if Note("shared-ignored") not in notes:
            notes.append(Note("shared-ignored"))
    path = f"{app.store_dir(m.store) / m.file}:"
    for why in app.projector.unwritten:
        if why.startswith(path):
            notes.append(Note("unwritten", why))
            return


def _safe_holder(exc: LockTimeout) -> LockHolder | None:
    h = exc.holder
    return LockHolder(h.get("pid"), h.get("host"), h.get("held_for")) if h else None


@contextlib.contextmanager
def _timed(trace: GateTrace, name: str) -> Iterator[None]:
    """Time spent waiting on an outside service, kept apart in the trace: the gate's own
    overhead budget (p95 <= 50 ms at 10k memories, <= 80 ms at 100k) excludes it."""
    start = time.perf_counter()
    try:
        yield
    finally:
        trace.timings[name] = trace.timings.get(name, 0.0) + time.perf_counter() - start


def _dry_outcome(app: Realmem, cand: Candidate, plan: Plan, trace: GateTrace, notes: list[Note]) -> Outcome:
    m = app.memory(plan.target) if plan.target else None
    if trace.decision is None:
        trace.decision = DecisionTrace(plan.action, plan.rule)
    if plan.reason and trace.decision.reason is None:
        trace.decision.reason = plan.reason
    return Outcome(plan.action, m, notes, trace, queued=plan.action == Action.QUEUE, rule=plan.rule,
                   reason=plan.reason, store=plan.store, caption=plan.caption, dry_run=True)
