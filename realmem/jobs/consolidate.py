"""`/realmem consolidate`: shrink and clean the memory base (spec: "Consolidation").

Two passes compute a plan in memory; nothing is written until both have finished, so a
cancel (the progress callback raising, e.g. ``realmem.interface.rpc.Cancelled`` or KeyboardInterrupt)
writes nothing.

1. SemIf review.  Every memory of the selected stores, least used first, is judged against its
   most similar memories in the same store (hybrid BM25 + vector search restricted to that
   store, so facts never move between scopes).  The first rule that fires wins: forget (P(forget)
   or low importance), covered (dropped into its neighbour), supersede (the older memory is
   rewritten with the newer one's facts), merge, revise.  A memory folded or changed earlier in
   the run is not reviewed again, and a folded one is no longer offered as a neighbour.
2. Path revision (project stores).  The Edit/Merge model gets the repository summary, the
   collapsed file tree and each memory with its current paths, and answers new paths; paths
   that do not exist in the tree or leave the project are discarded.

The plan is a set of groups, one per surviving memory that changes: its final caption, content
and paths, the memories it absorbs (their used_count carried via ``used_delta``) and the
decisions behind it.  Applying a group is ONE ``emit`` (the absorbing ``MemoryEdited``, the
``Decided`` audit records and the ``MemoryForgotten(reason="folded")`` of every absorbed
memory), so a crash can never delete a folded memory without its absorber being written.
Under the write lock each group first checks that none of its memories changed since they were
read (``last_seq``); a group that did is left alone and reported as skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from realmem.gate import judge
from realmem.read import embedder
from realmem.stores import frames, ids
from realmem.write import memories, observe
from realmem.stores import paths as pth
from realmem.read import search
from realmem.app import Realmem, RealmemError
from realmem.clients import (
    Answer,
    ChoiceAnswer,
    EndpointError,
    EndpointUnavailable,
    NoulAnswer,
    Question,
    ScoreAnswer,
)
from realmem.events import types as ev
from realmem.events.types import Key
from realmem.projections import queries
from realmem.frontend import settings_hint
from realmem.jobs import tree as treemod
from realmem.gate import rewrite as rw
from realmem.clients.chat import chat_client
from realmem.gate.rewrite import rewrite
from realmem.stores.project import store_kind
from realmem.projections.state import Memory
from realmem.words import count
from realmem.logs import get_logger

logger = get_logger("realmem.consolidate")

Progress = Callable[[int, int, str], None]

REASONS = {"covered": "consolidate-covered", "superseded": "consolidate-supersede", "merged": "consolidate-merge",
           "revised": "consolidate-revise", "paths": "consolidate-paths"}
MAX_JUDGE_FAILURES = 3   # consecutive judge failures that abort the run (nothing written)
PATH_CONTENT_CHARS = 600  # content shown per memory in a path-revision batch


@attrs.define
class Change:
    """One change made, or declined, as values; ``interface.render.change_detail`` words it.

    ``why`` says why a memory was refused (``unsafe``, ``not-shorter``) or skipped
    (``no-answer``: the judge did not answer; ``fallback``: only the deterministic rewrite
    answered, ``value`` says why; ``edited``: edited while consolidation ran; ``edited-with``:
    left alone with its group, ``value`` names the memories edited)."""

    kind: str  # forgotten | covered | superseded | merged | revised | paths | refused | skipped
    id: str    # ids.short of the memory the change is about (for folds: the one that disappeared)
    caption: str
    other: str | None = None  # for folds: the surviving memory
    why: str = ""
    # forgotten: the rule; covered, superseded: the other memory's caption; merged: the merged
    # caption; revised: the new caption, when it changed
    value: str = ""
    fallback: bool = False    # folded by the deterministic rewrite, the model's failed
    sizes: tuple[int, int] | None = None  # characters of caption and content before and after a revision
    paths: tuple[list[str], list[str], list[str]] | None = None  # before, after, discarded ("path (why)")


@attrs.frozen
class Skip:
    """A pass that could not run: ``what`` is ``revisions``, ``paths`` or ``path-batch`` (of
    ``n`` memories); ``why`` is ``no-model`` (no Edit/Merge model), ``summary-failed`` or
    ``failed``, with the ``error``."""

    what: str
    why: str
    error: str = ""
    n: int = 0


@attrs.define
class Report:
    changes: list[Change]
    reviewed: int
    stores: list[str]
    cancelled: bool = False
    notes: list[Skip] = attrs.Factory(list)  # passes that could not run, and why


# --- the plan ----------------------------------------------------------------------------------

@attrs.define
class _Group:
    """A surviving memory that changes, with everything folded into it."""

    key: Key
    caption: str
    content: str
    paths: list[str]
    used_delta: int = 0
    absorbed: list[Key] = attrs.Factory(list)
    decisions: list[ev.Decided] = attrs.Factory(list)
    changes: list[Change] = attrs.Factory(list)


class _Plan:
    def __init__(self, app: Realmem, snapshot: dict[Key, Memory], used: dict[Key, int]) -> None:
        self.app = app
        self.snapshot = snapshot
        self.used = used
        self.groups: dict[Key, _Group] = {}
        self.order: list[Key] = []  # group creation order (apply order)
        self.forgets: list[tuple[Key, ev.Decided, Change]] = []
        self.gone: set[Key] = set()     # forgotten or folded in this plan
        self.touched: set[Key] = set()  # gone or changed: not reviewed again
        self.skipped: list[Change] = []  # reported, nothing written: skipped or refused
        self.notes: list[Skip] = []

    # views of the planned state
    def caption(self, key: Key) -> str:
        g = self.groups.get(key)
        return g.caption if g else self.snapshot[key].caption

    def content(self, key: Key) -> str:
        g = self.groups.get(key)
        return g.content if g else self.snapshot[key].content

    def paths(self, key: Key) -> list[str]:
        g = self.groups.get(key)
        return list(g.paths) if g else list(self.snapshot[key].paths)

    def view(self, key: Key) -> Memory:
        """The memory as the plan has it so far (what a rewrite starts from)."""
        m = self.snapshot[key]
        return attrs.evolve(m, fields=attrs.evolve(m.fields, caption=self.caption(key), content=self.content(key),
                                                   paths=self.paths(key)))

    def group(self, key: Key) -> _Group:
        g = self.groups.get(key)
        if g is None:
            m = self.snapshot[key]
            g = self.groups[key] = _Group(key, m.caption, m.content, list(m.paths))
            self.order.append(key)
        return g

    # plan steps
    def forget(self, key: Key, decision: ev.Decided, change: Change) -> None:
        self.forgets.append((key, decision, change))
        self.gone.add(key)
        self.touched.add(key)

    def fold(self, survivor: Key, folded: Key, caption: str, content: str, decision: ev.Decided,
             change: Change) -> None:
        """``folded`` disappears into ``survivor``, which takes the new text, both path scopes and
        the folded memory's used_count (plus whatever the folded one had absorbed before)."""
        folded_paths = self.paths(folded)
        g = self.group(survivor)
        fg = self.groups.pop(folded, None)
        if fg is not None:
            self.order.remove(folded)
        g.caption, g.content = caption, content
        g.paths = memories.union_paths(g.paths, folded_paths, survivor[0])
        g.used_delta += self.used.get(folded, 0) + (fg.used_delta if fg else 0)
        g.absorbed.append(folded)
        if fg is not None:
            g.absorbed.extend(fg.absorbed)
            g.decisions.extend(fg.decisions)
            g.changes.extend(fg.changes)
        g.decisions.append(decision)
        g.changes.append(change)
        self.gone.add(folded)
        self.touched.update((survivor, folded))

    def revise(self, key: Key, caption: str, content: str, decision: ev.Decided, change: Change) -> None:
        g = self.group(key)
        g.caption, g.content = caption, content
        g.decisions.append(decision)
        g.changes.append(change)
        self.touched.add(key)

    def set_paths(self, key: Key, new_paths: list[str], decision: ev.Decided, change: Change) -> None:
        g = self.group(key)
        g.paths = list(new_paths)
        g.decisions.append(decision)
        g.changes.append(change)

    def survivors(self, stores: list[str]) -> list[Key]:
        return [k for k in self.snapshot if k[0] in stores and k not in self.gone]


# --- pass 1: SemIf review -------------------------------------------------------------------------

CHOICE_INSTRUCTIONS = {
    "covered_by": "Which neighbour already states everything the memory under review says, so that the memory "
                  "under review adds nothing? Answer none if no neighbour covers it.",
    "conflict_with": "Which neighbour contradicts the memory under review about the same subject (a different "
                     "tool, number, command or rule for the same thing)? Answer none if none contradicts it.",
    "merge_with": "Which neighbour is about the same narrow subject as the memory under review, so the two "
                  "should be combined into one memory? Answer none if none should.",
}


def review_questions(neighbours: list[judge.Neighbour], max_options: int
                     ) -> tuple[dict[str, Question], dict[str, list[str]]]:
    qs, shards = judge.pick_questions(neighbours, CHOICE_INSTRUCTIONS, max_options)
    qs["forget"] = Question("noul", "Should the memory under review be deleted because it is obsolete, transient "
                                    "(the status of a past task), speculative or trivial?")
    qs["importance"] = Question("score", "How important is it that a coding agent knows the memory under review?",
                                list(judge.IMPORTANCE_LEVELS))
    qs["revise"] = Question("noul", "Is the memory under review unclear or verbose, so that rewriting it clearer and "
                                    "shorter with the same information would help?")
    return qs, shards


def _vector(app: Realmem, m: Memory) -> list[float] | None:
    try:
        return embedder.embed_document(app, m.caption, m.content, m.hash)
    except (EndpointUnavailable, EndpointError) as exc:
        logger.warning("embedder unavailable; BM25 neighbours only", error=str(exc))
        return None


def neighbours(app: Realmem, plan: _Plan, key: Key, limit: int) -> list[Key]:
    """The most similar memories in the same store (hybrid, RRF-fused), still alive in the plan."""
    m = plan.snapshot[key]
    text = f"{m.caption}\n{m.content}"
    fetch = max(limit * 2, limit + len(plan.gone) + 1)
    lists_b = [search.bm25(app.conn, text, [m.store], fetch)]
    vec = _vector(app, m)
    lists_k = [search.knn(app.conn, vec, [m.store], fetch)] if vec else []
    out = []
    for h in search.fuse(lists_b, lists_k):
        if h.key == key or h.key in plan.gone or h.key not in plan.snapshot:
            continue
        out.append(h.key)
        if len(out) >= limit:
            break
    return out


def _older(a: Memory, b: Memory) -> bool:
    return (a.created, a.id) <= (b.created, b.id)


def _summaries(answers: dict[str, Answer]) -> dict[str, Any]:
    return {name: judge.answer_summary(a) for name, a in answers.items()}


class _Judge:
    def __init__(self, app: Realmem) -> None:
        self.app = app
        self.client = judge.client(app.config)
        self.failures = 0

    def ask(self, state: str, qs: dict[str, Question], shards: dict[str, list[str]]) -> dict[str, Answer] | None:
        if self.client is None:
            raise RealmemError(f"consolidation needs the SemIf judge: set semif.url ({settings_hint('semif.url')})")
        try:
            answers = self.client.ask(state, qs)
        except (EndpointUnavailable, EndpointError) as exc:
            self.failures += 1
            logger.warning("consolidate.judge_failed", error=str(exc), failures=self.failures)
            if self.failures >= MAX_JUDGE_FAILURES:
                raise RealmemError(f"the SemIf judge failed {self.failures} times in a row ({exc}); "
                                   "nothing was written") from exc
            return None
        self.failures = 0
        return judge.combine(answers, shards)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def _decided(app: Realmem, m: Memory, action: str, rule: str, target: Key, trace: dict[str, Any]) -> ev.Decided:
    return ev.Decided(m.id, app.project.key if app.project else None, ev.Action(f"consolidate-{action}"), rule,
                      [target[0], target[1]], trace)


def review(app: Realmem, plan: _Plan, jd: _Judge, key: Key) -> None:
    """Judge one memory and add what it calls for to the plan."""
    cfg = app.config
    m = plan.snapshot[key]
    near = neighbours(app, plan, key, int(cfg["consolidate.neighbors"]))
    by_short = {ids.short(k[1]): k for k in near}
    nbs = [judge.Neighbour(ids.short(k[1]), plan.caption(k), plan.content(k), store_kind(k[0]), plan.paths(k))
           for k in near]
    state = judge.build_state(m.caption, m.content, m.paths, store_kind(m.store), nbs)
    qs, shards = review_questions(nbs, int(cfg["semif.maxOptions"]))
    answers = jd.ask(state, qs, shards)
    if answers is None:
        plan.skipped.append(Change("skipped", ids.short(m.id), m.caption, why="no-answer"))
        return
    thresholds = {k: cfg[f"consolidate.{k}"] for k in ("forget", "minImportance", "coveredBy", "conflictWith",
                                                         "mergeWith", "revise")}
    trace: dict[str, Any] = {"answers": _summaries(answers), "raw": {n: judge.raw_answer(a) for n, a in answers.items()},
                             "thresholds": thresholds, "neighbours": list(by_short)}
    me = ids.short(m.id)

    p_forget = _noul(answers.get("forget"))
    importance = answers.get("importance")
    imp = importance.normalized if isinstance(importance, ScoreAnswer) else None
    min_imp = float(thresholds["minImportance"])
    if p_forget >= float(thresholds["forget"]) or (min_imp > 0 and imp is not None and imp < min_imp):
        rule = (f"P(forget) {p_forget:.2f} >= {thresholds['forget']}" if p_forget >= float(thresholds["forget"])
                else f"importance {imp:.2f} < {min_imp}")
        plan.forget(key, _decided(app, m, "forget", rule, key, trace), Change("forgotten", me, m.caption, value=rule))
        return

    def pick(name: str, threshold_key: str) -> tuple[Key, float] | None:
        a = answers.get(name)
        if not isinstance(a, ChoiceAnswer) or a.choice == judge.NONE or a.choice not in by_short:
            return None
        if a.p < float(thresholds[threshold_key]):
            return None
        return by_short[a.choice], a.p

    covered = pick("covered_by", "coveredBy")
    if covered is not None:
        other, p = covered
        rule = f"covered_by {ids.short(other[1])} p {p:.2f} >= {thresholds['coveredBy']}"
        plan.fold(other, key, plan.caption(other), plan.content(other),
                  _decided(app, m, "covered", rule, other, trace),
                  Change("covered", me, m.caption, ids.short(other[1]), value=plan.caption(other)))
        return

    conflict = pick("conflict_with", "conflictWith")
    if conflict is not None:
        other, p = conflict
        om = plan.snapshot[other]
        older, newer = (key, other) if _older(m, om) else (other, key)
        r = rewrite(app, "supersede", plan.view(older), plan.caption(newer), plan.content(newer))
        if _valid(r.caption, r.content):
            rule = f"conflict_with {ids.short(other[1])} p {p:.2f} >= {thresholds['conflictWith']}"
            trace = {**trace, "older": ids.short(older[1]), "newer": ids.short(newer[1]), "fallback": r.fallback}
            change = Change("superseded", ids.short(newer[1]), plan.caption(newer), ids.short(older[1]),
                            value=plan.caption(older), fallback=r.used_fallback)
            plan.fold(older, newer, r.caption, r.content, _decided(app, m, "supersede", rule, older, trace), change)
            return

    merge = pick("merge_with", "mergeWith")
    if merge is not None:
        other, p = merge
        r = rewrite(app, "merge", plan.view(other), m.caption, m.content)
        if _valid(r.caption, r.content):
            rule = f"merge_with {ids.short(other[1])} p {p:.2f} >= {thresholds['mergeWith']}"
            plan.fold(other, key, r.caption, r.content,
                      _decided(app, m, "merge", rule, other, {**trace, "fallback": r.fallback}),
                      Change("merged", me, m.caption, ids.short(other[1]), value=r.caption, fallback=r.used_fallback))
            return

    p_revise = _noul(answers.get("revise"))
    if p_revise >= float(thresholds["revise"]):
        _revise(app, plan, m, p_revise, thresholds["revise"], trace)


def _revise(app: Realmem, plan: _Plan, m: Memory, p_revise: float, threshold: Any, trace: dict[str, Any]) -> None:
    """Rewrite one memory clearer and shorter; a rewrite that is not shorter, or that the
    safety scan refused, is reported and nothing is written."""
    key, me = (m.store, m.id), ids.short(m.id)
    r = rewrite(app, "revise", plan.view(key), m.caption, m.content)
    if r.fallback == rw.UNSAFE:
        plan.skipped.append(Change("refused", me, m.caption, why="unsafe"))
        return
    if r.fallback == rw.NO_ENDPOINT:
        plan.notes.append(Skip("revisions", "no-model"))
        return
    if r.used_fallback:
        plan.skipped.append(Change("skipped", me, m.caption, why="fallback", value=r.fallback or ""))
        return
    if not _valid(r.caption, r.content) or (r.caption, r.content) == (m.caption, m.content):
        return
    before, after = len(m.caption) + len(m.content), len(r.caption) + len(r.content)
    if after >= before:  # revise means clearer AND shorter
        plan.skipped.append(Change("refused", me, m.caption, why="not-shorter", sizes=(before, after)))
        return
    rule = f"P(revise) {p_revise:.2f} >= {threshold}"
    plan.revise(key, r.caption, r.content, _decided(app, m, "revise", rule, key, trace),
                Change("revised", me, m.caption, value=r.caption if r.caption != m.caption else "",
                       sizes=(before, after)))


def _noul(a: Answer | None) -> float:
    return a.p if isinstance(a, NoulAnswer) else 0.0


def _valid(caption: str, content: str) -> bool:
    try:
        memories.validate(caption, content)
    except RealmemError:
        return False
    return True


# --- pass 2: path revision ----------------------------------------------------------------------

_GLOB = re.compile(r"[*?\[]")
_ID_KEY = re.compile(r"[\[\]\s`\"']")


def _home() -> Path:
    return frames.user_home()


def check_path(raw: Any, root: Path, tree: treemod.Tree, current: list[str]) -> tuple[str | None, str]:
    """(stored path, "") when an answered path is acceptable, else (None, why it was discarded)."""
    if not isinstance(raw, str) or not raw.strip():
        return None, "not a path"
    try:
        absolute = pth.normalize_input(raw, cwd=root, home=_home())
    except pth.PathError as exc:
        return None, str(exc)
    if not pth.in_project(absolute, root):
        return None, "outside the project"
    rel = pth.to_store_frame(absolute, kind=pth.PROJECT, root=root, home=_home())
    if rel in current and pth.exists(absolute):
        return rel, ""  # an existing path the fact already had (it may be git-ignored)
    if _GLOB.search(rel):
        root_text = str(root)
        for f in (*tree.files, *tree.dirs):
            if pth.matches(absolute, f"{root_text}/{f}"):
                return rel, ""
        return None, "matches nothing in the tree"
    if tree.has(rel):
        return rel, ""
    return None, "not in the tree"


def path_prompt(summary: str, tree: treemod.Tree, items: list[tuple[str, str, str, list[tuple[str, bool]]]]
                ) -> list[dict[str, str]]:
    lines = ["Below are facts from a coding agent's memory about this repository, each with the paths it is "
             "attached to (an agent touching one of these paths is shown the fact).  For every fact, give the "
             "paths it should be attached to: drop paths that are gone or unrelated, add the files or "
             "directories the fact applies to, and answer [\".\"] for facts about the whole project.  Use paths "
             "relative to the repository root exactly as they appear in the tree (directories and globs such as "
             "src/**/*.py are allowed).",
             "", "REPOSITORY SUMMARY", summary.strip() or "(none)", "", "FILE TREE", tree.text or "(empty)", "",
             "FACTS"]
    for short, caption, content, current in items:
        body = content if len(content) <= PATH_CONTENT_CHARS else content[:PATH_CONTENT_CHARS] + " …"
        shown = ", ".join(p + ("" if ok else " (missing)") for p, ok in current) or "."
        lines += [f"[{short}] {caption}", *("  " + ln for ln in body.splitlines() if ln.strip()),
                  f"  paths: {shown}", ""]
    lines.append('Reply with one JSON object only: {"<id>": ["path", ...], ...} with every id above.')
    return [{"role": "system", "content": treemod.SUMMARY_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def _answer_for(reply: dict[str, Any], short: str, canonical: str) -> Any:
    for k, v in reply.items():
        kk = _ID_KEY.sub("", str(k))
        if kk in (short, canonical):
            return v
    return None


def path_pass(app: Realmem, plan: _Plan, stores: list[str], progress: Callable[[str], None],
                 notes: list[Skip]) -> None:
    project_stores = [s for s in stores if store_kind(s) in ("shared", "personal")]
    roots: dict[Path, list[str]] = {}
    for s in project_stores:
        root = app.store_root(s)
        if root is not None:
            roots.setdefault(root, []).append(s)
    for root, group_stores in roots.items():
        keys = sorted((k for k in plan.survivors(group_stores) if not plan.snapshot[k].quarantined),
                      key=lambda k: (group_stores.index(k[0]), plan.snapshot[k].created, k[1]))
        if not keys:
            continue
        client = chat_client(app)
        try:
            if not client.configured:
                notes.append(Skip("paths", "no-model"))
                return
            is_git = app.project.is_git if app.project is not None and app.project.root == root else None
            tree = treemod.build(root, int(app.config["consolidate.treeLines"]), is_git=is_git)
            try:
                summary = treemod.summarise(app, tree, client)
            except (EndpointUnavailable, EndpointError) as exc:
                notes.append(Skip("paths", "summary-failed", str(exc)))
                return
            size = max(1, int(app.config["consolidate.batch"]))
            batches = [keys[i:i + size] for i in range(0, len(keys), size)]
            for n, batch in enumerate(batches, 1):
                _revise_batch(app, plan, client, root, tree, summary, batch, notes)
                progress(f"paths: batch {n}/{len(batches)}")
        finally:
            client.close()


def _revise_batch(app: Realmem, plan: _Plan, client: Any, root: Path, tree: treemod.Tree, summary: str,
                  batch: list[Key], notes: list[Skip]) -> None:
    items = []
    for k in batch:
        current = plan.paths(k)
        checked = []
        for p in current:
            try:
                ok = pth.exists(pth.to_absolute(p, kind=pth.PROJECT, root=root, home=_home()))
            except pth.PathError:
                ok = False
            checked.append((p, ok))
        items.append((ids.short(k[1]), plan.caption(k), plan.content(k), checked))
    try:
        reply = client.complete_json(path_prompt(summary, tree, items))
    except (EndpointUnavailable, EndpointError) as exc:
        notes.append(Skip("path-batch", "failed", str(exc), len(batch)))
        return
    for k in batch:
        answer = _answer_for(reply, ids.short(k[1]), k[1])
        if not isinstance(answer, list):
            continue
        current = plan.paths(k)
        kept: list[str] = []
        discarded: list[str] = []
        for raw in answer:
            rel, why = check_path(raw, root, tree, current)
            if rel is None:
                discarded.append(f"{raw} ({why})")
            elif rel not in kept:
                kept.append(rel)
        if "." in kept:
            kept = ["."]
        if not kept or set(kept) == set(current):
            continue
        m = plan.snapshot[k]
        trace = {"old": current, "answered": answer, "kept": kept, "discarded": discarded,
                 "tree_hash": tree.hash}
        plan.set_paths(k, kept, _decided(app, m, "paths", "path revision", k, trace),
                       Change("paths", ids.short(k[1]), plan.caption(k), paths=(current, kept, discarded)))


# --- running and applying -----------------------------------------------------------------------

def resolve_stores(app: Realmem, scopes: list[str] | None) -> list[str]:
    if not scopes:
        return app.visible_stores()
    out: list[str] = []
    for s in scopes:
        store = app.store_for_scope(s)
        if store not in out:
            out.append(store)
    return out


def consolidate(app: Realmem, *, stores: list[str] | None = None, revise_paths: bool = True,
                progress: Progress | None = None) -> Report:
    """Review, plan and then apply; see the module docstring.  An exception from ``progress``
    (a cancel) propagates before anything is written."""
    store_ids = resolve_stores(app, stores)
    snapshot = {(m.store, m.id): m for m in app.memories(store_ids)}
    counted = queries.used_counts(app.conn, list(snapshot))  # one query per store, not one per memory
    used = {k: counted.get(k, 0) for k in snapshot}
    plan = _Plan(app, snapshot, used)
    order = sorted(snapshot, key=lambda k: (used[k], snapshot[k].created, k[1]))
    do_paths = bool(revise_paths) and bool(app.config["consolidate.paths"])
    project_count = sum(1 for k in snapshot if store_kind(k[0]) in ("shared", "personal"))
    size = max(1, int(app.config["consolidate.batch"]))
    total = len(order) + (-(-project_count // size) if do_paths else 0) + 1
    done = 0

    def tick(message: str) -> None:
        nonlocal done
        done = min(done + 1, total - 1)
        if progress is not None:
            progress(done, total, message)

    notes: list[Skip] = []
    reviewed = 0
    jd = _Judge(app)
    try:
        for key in order:
            if key not in plan.touched:
                review(app, plan, jd, key)
                reviewed += 1
            tick(f"review: {snapshot[key].caption[:60]}")
    finally:
        jd.close()
    if do_paths:
        path_pass(app, plan, store_ids, tick, notes)
    if progress is not None:  # the last chance to cancel: nothing has been written yet
        progress(total, total, f"applying {count(len(plan.forgets) + len(plan.groups), 'change')}")
    changes = apply(app, plan)
    return Report(changes, reviewed, store_ids, notes=list(dict.fromkeys([*plan.notes, *notes])))


def _stale(app: Realmem, plan: _Plan, keys: list[Key]) -> list[Key]:
    out = []
    for k in keys:
        cur = app.memory(k)
        if cur is None or cur.last_seq != plan.snapshot[k].last_seq:
            out.append(k)
    return out


def _skip(plan: _Plan, keys: list[Key], stale: list[Key]) -> list[Change]:
    out = []
    names = ", ".join(ids.short(k[1]) for k in stale)
    for k in keys:
        m = plan.snapshot[k]
        out.append(Change("skipped", ids.short(k[1]), m.caption, why="edited" if k in stale else "edited-with",
                          value="" if k in stale else names))
    return out


def apply(app: Realmem, plan: _Plan) -> list[Change]:
    """Write the plan, group by group, each one atomic emit; stale groups are skipped."""
    changes: list[Change] = []
    with app.write_lease():
        # A file a pull renamed, changed or deleted while the plan was made is observed first,
        # so its memory counts as changed meanwhile and is left alone (a forget would miss it).
        observe.before_write(app, list(plan.snapshot))
        for key, decision, change in plan.forgets:
            stale = _stale(app, plan, [key])
            if stale:
                changes.extend(_skip(plan, [key], stale))
                continue
            app.emit([decision, ev.MemoryForgotten(key[0], key[1], "consolidate-forget")])
            changes.append(change)
        for key in plan.order:
            g = plan.groups[key]
            involved = [key, *g.absorbed]
            stale = _stale(app, plan, involved)
            if stale:
                changes.extend(_skip(plan, involved, stale))
                continue
            reason = REASONS.get(g.changes[0].kind, "consolidate") if g.changes else "consolidate"
            extra: list[ev.Event] = [*g.decisions, *(ev.MemoryForgotten(k[0], k[1], "folded") for k in g.absorbed)]
            memories.edit(app, key, caption=g.caption, content=g.content, stored_paths=g.paths, reason=reason,
                          absorbed=[k[1] for k in g.absorbed], used_delta=g.used_delta, extra=extra)
            changes.extend(g.changes)
    changes.extend(plan.skipped)
    return changes
