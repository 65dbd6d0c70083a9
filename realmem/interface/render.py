"""Text the model and people read: compact, token-frugal, 22-character ids.

The use cases return values (the gate's ``Outcome``, consolidation's ``Report``, the status
dict); every sentence made of them is here, so a sentence is changed in this one module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from realmem.stores import ids
from realmem.read.escape import inline
from realmem.events.trace import DecisionTrace, GateDetails, GateTrace, JudgeTrace, NeighbourTrace, SafetyTrace
from realmem.events.types import Action, Key
from realmem.frontend import hint
from realmem.stores.project import store_kind
from realmem.words import count, quoted

if TYPE_CHECKING:  # recall, the gate and the jobs load slowly, and status needs none of them
    from realmem.projections.state import Memory
    from realmem.read.recall import Result
    from realmem.gate.remember import Note, Outcome
    from realmem.interface.session import Findings
    from realmem.jobs.consolidate import Change, Report, Skip


def ref(m: Memory) -> str:
    return f"[{ids.short(m.id)}] {m.caption}"


def where(m: Memory) -> str:
    paths = ", ".join(inline(p) for p in m.paths if p not in (".", "~"))
    return f"{store_kind(m.store)}" + (f" · {paths}" if paths else "")


def memory_block(m: Memory, used: int | None = None, stale: str | None = None) -> str:
    meta = where(m) + (f" · used {used}" if used else "")
    flag = f"⚠ {stale}\n" if stale else ""
    return f"{ref(m)} ({meta})\n{flag}{m.content}"


def nothing_found(r: Result) -> str:
    """What to say for an empty page of recall (or above weak matches)."""
    if r.past_end and r.total:
        return f"There is no page {r.page}: {count(r.total, 'memory fills', 'memories fill')} {count(r.pages, 'page')}."
    if not r.asked:
        return "Nothing to recall: give a query, paths or ids."
    if r.queries:
        return "No memory matches " + " or ".join(quoted(q) for q in r.queries) + "."
    return "No memory matches those paths or ids."


def recall_text(r: Result, stale: Mapping[Key, str] | None = None) -> str:
    """Recall as the model reads it: a head with the page, one block per memory (with its
    freshness flag from ``stale``, freshness.flags_text), the next page."""
    if not r.items:
        return "\n".join([nothing_found(r), *r.notes, *r.errors])
    head = f"{count(r.total, 'memory')}, page {r.page} of {r.pages}:"
    if r.weak:
        head = (f"{nothing_found(r)} Closest, as weak matches (they may not answer it; "
                f"check before relying on them):")
    blocks = []
    for n, i in enumerate(r.items):
        if i.weak and not r.weak and (n == 0 or not r.items[n - 1].weak):
            blocks.append("Weaker, possibly related (not counted as used; check before relying on them):")
        blocks.append(memory_block(i.memory, i.used_count, (stale or {}).get((i.memory.store, i.memory.id))))
    body = "\n\n".join(blocks)
    tail = [f"More: page={r.page + 1}."] if r.page < r.pages else []
    return "\n".join([*r.notes, head, "", body, *([""] + tail if tail else []), *r.errors])


def list_text(r: Result) -> str:
    if r.past_end and r.total:
        return nothing_found(r)
    if not r.items:
        return "No memories yet."
    lines = [f"{count(r.total, 'memory')}, page {r.page} of {r.pages} (sorted by path, then used):"]
    for i in r.items:
        lines.append(f"{ref(i.memory)} ({where(i.memory)}"
                     + (f" · used {i.used_count}" if i.used_count else "") + ")")
    if r.page < r.pages:
        lines.append(f"More: page={r.page + 1}.")
    return "\n".join(lines)


def memory_json(m: Memory, used: int = 0, injected: int = 0) -> dict:
    return {
        "id": ids.short(m.id), "uuid": m.id, "caption": m.caption, "content": m.content,
        "scope": store_kind(m.store), "store": m.store, "paths": m.paths, "used_count": used,
        "path_inject_count": injected, "created": m.created, "updated": m.updated, "file": m.file,
        "quarantined": m.quarantined,
    }


def table(headers: list[str], rows: list[list[object]], max_width: int = 60) -> str:
    """A plain aligned table for people scanning a terminal."""
    cells = [[str(h) for h in headers]] + [[_clip(str(c), max_width) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip()  # noqa: E731
    return "\n".join([line(cells[0]), line(["─" * w for w in widths]), *[line(r) for r in cells[1:]]])


def _clip(s: str, n: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


# --- the remember gate's outcome ----------------------------------------------------------------

def outcome_text(o: Outcome) -> str:
    """What the gate did, as the model (remember tool) and the user (CLI) read it; a memory
    written says what its notes say on the lines after."""
    if o.action == Action.REFUSE:
        return "Refused: " + o.reason.removeprefix("refused: ") + "."
    if o.dry_run:
        return _dry_text(o)
    m, kind = o.memory, store_kind(o.store)
    if o.action == Action.QUEUE:
        return _queued_text(o)
    if o.action == Action.REJECT:
        if o.rule == "dropped":
            return f"Dropped a queued candidate: {o.reason}"
        return f"Not stored: {_reject_reason(o)}."
    if o.action == Action.REINFORCE:
        if m is None:
            return "Already known."
        if m.store != o.store:  # covered by a memory in a wider store: no copy in the candidate's
            return f"Already known: {ref(m)} ({store_kind(m.store)}; reinforced, no {kind} copy added)."
        return f"Already known: {ref(m)} (reinforced)."
    assert m is not None  # add, edit, merge and widen always write one
    if o.action == Action.ADD:
        text = f"Stored {ref(m)} ({store_kind(m.store)})."
    elif o.action == Action.EDIT:
        text = f"Updated {ref(m)} ({store_kind(m.store)}): the new fact replaced what conflicted."
    elif o.action == Action.MERGE:
        text = f"Merged into {ref(m)} ({store_kind(m.store)})."
    else:
        text = f"Already known: {ref(m)}; its paths now include {', '.join(map(inline, m.paths))}."
    return "\n".join([text, *outcome_notes(o)])


def outcome_notes(o: Outcome) -> list[str]:
    """The outcome's notes, one line each (the tools' ``warnings``)."""
    return [note_text(n) for n in o.notes]


def note_text(n: Note) -> str:
    if n.kind == "redacted":
        return f"note: {n.detail}"
    if n.kind == "shared-ignored":
        return "note: .pi/realmem is ignored by git; this memory will not be committed"
    assert n.kind == "unwritten", n.kind
    return (f"note: recorded, but its fact file could not be written ({n.detail}); "
            "realmem writes it once the store is writable again")


def _queued_text(o: Outcome) -> str:
    if o.rule == "kept-after-error":
        return f"Kept a queued candidate after an error: {o.reason}"
    if o.rule == "no-judge":
        return f"Queued: {o.reason}; it is judged and stored once a judge is reachable."
    if o.failed:
        return (f"Failed: {o.reason}, {o.failed} times; it stays queued but is no longer retried "
                f"automatically. Fix the setting ({hint('settings', 'settings test')}), then {hint('retry')}.")
    if o.rule == "lock-busy":
        return "Queued: another process holds the write lock; it will be retried automatically."
    return f"Queued: {o.reason}; it will be retried automatically."


def _dry_text(o: Outcome) -> str:
    if o.action == Action.QUEUE:
        return f"Would queue: {o.reason}."
    if o.action == Action.REJECT:
        return f"Would not store: {_reject_reason(o)}."
    if o.action == Action.ADD:
        return f"Would store as a new {store_kind(o.store)} memory: {o.caption}."
    if o.memory is not None:
        return f"Would {o.action} {ref(o.memory)} ({store_kind(o.memory.store)})."
    return f"Would {o.action}."


def _reject_reason(o: Outcome) -> str:
    d = o.trace.decision if o.trace is not None else None
    return reject_reason(o.rule, d.details if d is not None else None)


def reject_reason(rule: str, d: GateDetails | None) -> str:
    """A short explanation of a rejection by the gate's rules (``rule``, with the judge's
    figures in ``d``) for the model."""
    if d is None:
        return rule
    t = d.thresholds
    if rule == "unsafe":
        return f"judged unsafe (P={d.unsafe:.2f})"
    if rule == "not-important":
        return f"judged not important enough ({d.importance:.2f} < {t.get('importance')})"
    if rule == "not-durable":
        return f"judged not durable, it looks like task status (P={d.durable:.2f} < {t.get('durable')})"
    return rule


# --- consolidation's report ---------------------------------------------------------------------

# The report's sections, in order, by the kind of change.
HEADINGS = {
    "forgotten": "Forgotten (obsolete, transient, speculative, trivial or unimportant)",
    "covered": "Covered (dropped into a memory that already says it)",
    "superseded": "Superseded (the older memory rewritten with the newer facts)",
    "merged": "Merged",
    "revised": "Revised (clearer and shorter)",
    "paths": "Paths revised",
    "refused": "Not revised (the rewrite was refused; the memory is unchanged)",
    "skipped": "Skipped (edited while consolidation ran, or could not be judged)",
}


def consolidation_text(report: Report) -> str:
    scopes = ", ".join(dict.fromkeys(store_kind(s) for s in report.stores)) or "no stores"
    if report.cancelled:
        return f"Consolidation cancelled ({scopes}); nothing was written."
    written = [c for c in report.changes if c.kind not in ("skipped", "refused")]
    lines = [f"Consolidation reviewed {count(report.reviewed, 'memory')} ({scopes}): {count(len(written), 'change')}."]
    if not report.changes:
        lines.append("Nothing to change.")
    for kind, heading in HEADINGS.items():
        group = [c for c in report.changes if c.kind == kind]
        if not group:
            continue
        lines += ["", f"{heading}: {len(group)}"]
        for c in group:
            line = f"  {c.id}  {c.caption}"
            if c.other:
                line += f"  → {c.other}"
            detail = change_detail(c)
            if detail:
                line += f"  — {detail}"
            lines.append(line)
    for note in report.notes:
        lines += ["", f"Note: {skip_text(note)}"]
    return "\n".join(lines)


def consolidation_json(report: Report) -> dict[str, Any]:
    counts = {k: sum(1 for c in report.changes if c.kind == k) for k in HEADINGS}
    return {"changes": [{"kind": c.kind, "id": c.id, "caption": c.caption, "other": c.other,
                         "detail": change_detail(c)} for c in report.changes],
            "reviewed": report.reviewed, "stores": list(report.stores),
            "scopes": [store_kind(s) for s in report.stores], "cancelled": report.cancelled, "counts": counts,
            "notes": [skip_text(n) for n in report.notes]}


def change_detail(c: Change) -> str:
    """What the report says after a change's ids and caption."""
    fallback = " (deterministic fallback)" if c.fallback else ""
    if c.kind == "covered":
        return f"already said by “{c.value}”"
    if c.kind == "superseded":
        return f"contradicted “{c.value}”; the older memory {c.other} now holds the newer facts{fallback}"
    if c.kind == "merged":
        return f"merged into “{c.value}”{fallback}"
    if c.kind == "revised":
        assert c.sizes is not None
        return f"{c.sizes[0]} -> {c.sizes[1]} characters" + (f"; caption now “{c.value}”" if c.value else "")
    if c.kind == "paths":
        assert c.paths is not None
        before, after, discarded = c.paths
        return f"{', '.join(before) or '.'} -> {', '.join(after)}" + (
            f"; discarded {', '.join(discarded)}" if discarded else "")
    if c.why == "unsafe":
        return "revision refused: failed the safety scan"
    if c.why == "not-shorter":
        assert c.sizes is not None
        return f"revision refused: not shorter ({c.sizes[0]} -> {c.sizes[1]} characters)"
    if c.why == "no-answer":
        return "the SemIf judge did not answer"
    if c.why == "fallback":
        return f"not revised: {c.value}"
    if c.why == "edited":
        return "edited while consolidation ran; left alone"
    if c.why == "edited-with":
        return f"left alone: {c.value} was edited while consolidation ran"
    return c.value  # forgotten: the rule that fired


def skip_text(s: Skip) -> str:
    if s.why == "no-model":
        what = "revisions" if s.what == "revisions" else "path revision"
        return f"{what} skipped: no Edit/Merge model (set rewriter.url, or run it inside Pi)"
    if s.why == "summary-failed":
        return f"path revision skipped: the repository summary failed ({s.error})"
    return f"path revision of {count(s.n, 'memory')} skipped: {s.error}"


# --- status ------------------------------------------------------------------------------------

# How status and settings name the rewriter when no chat endpoint of its own is set.
REWRITER_BRIDGE = "Pi's current model (bridge)"
REWRITER_UNSET = "not set: Edit/Merge use a deterministic fallback until Pi runs realmem or rewriter.url is set"


def status_text(info: dict[str, Any]) -> str:
    """`realmem status` and the status tool, from ``status.gather``."""
    lines = []
    if info["project"]:
        lines.append(f"Project {info['project']['root']} ({info['project']['key']})")
    for s in info["stores"]:
        q = f", {s['quarantined']} quarantined" if s["quarantined"] else ""
        n, noun = count(s["memories"], "memory").split(" ", 1)  # a table: counts, nouns, dirs each one column
        lines.append(f"  {s['scope']:<8} {n:>5} {noun:<8}{q}  {s['dir']}")
    if info["queued"]:
        lines.append(f"Queued candidates: {info['queued']} (retried automatically; {hint('retry')})")
    if info.get("failed"):
        lines.append(f"Failed candidates: {len(info['failed'])}, kept but no longer retried automatically "
                     f"(fix the setting, then {hint('retry')}):")
        lines.extend(f"  {reason}" for reason in dict.fromkeys(info["failed"]))
    for name, e in info["endpoints"].items():
        if e["url"]:
            shown = f"{e['url']} · {e['model']}"
        elif e.get("bridge"):
            shown = REWRITER_BRIDGE
        elif e.get("local"):
            shown = f"local · {e['local']} (bundled, offline)"
        elif name == "rewriter":
            shown = REWRITER_UNSET
        else:
            shown = "not set"
        lines.append(f"  {name:<9} {shown}")
    if info["judge"] is None:
        why = info["no_judge"]
        lines.append(f"{why[0].upper()}{why[1:]}; new memories are queued until one is.")
    elif info["judge"] == "chat":
        lines.append("Judge: the chat model (semif.url is not set; the rewriter's model judges each remember).")
    w = info["worker"]
    lines.append(f"Worker: {'running (pid ' + str(w['pid']) + ')' if w.get('alive') else 'not running'}")
    if info["missing_paths"]:
        lines.append(f"{count(info['missing_paths'], 'memory points', 'memories point')} at paths that no longer exist "
                     f"({hint('manage, prune-paths', 'manage, realmem prune-paths')}).")
    for p in info["problems"]:
        lines.append(f"Problem: {p['message']}")
    if info["gitignore"]:
        lines.append("Warning: " + info["gitignore"])
    return "\n".join(lines)


# --- session start -----------------------------------------------------------------------------

def session_notification(f: Findings) -> str | None:
    """The one notification a session starts with, or None when there is nothing to say."""
    notes: list[str] = []
    if f.gitignore:
        notes.append(f.gitignore)
    if f.missing:
        notes.append(f"{count(f.missing, 'memory points', 'memories point')} at paths that no longer exist "
                     f"({hint('manage')} shows ✗ and suggested locations; {hint('prune-paths')} drops them).")
    if f.stripped:
        notes.append(f"Imported, so not in the prompt: {', '.join(f.stripped)} "
                     f"(realmem replaces {'it' if len(f.stripped) == 1 else 'them'}).")
    if f.rekeyed is not None:
        moved = f.rekeyed
        n = count(moved["count"], "personal memory", "personal memories")
        notes.append(f"The project key changed ({moved['from'][:16]}… → {moved['to'][:16]}…: a shallow clone "
                     f"unshallowed, or history rewritten); {n} moved with it.")
    if f.queued and f.no_judge is not None:
        notes.append(f"{count(f.queued, 'candidate memory is', 'candidate memories are')} queued for this project: "
                     f"{f.no_judge}; they are judged and stored then.")
    elif f.queued:
        notes.append(f"{count(f.queued, 'candidate memory is', 'candidate memories are')} queued for this project "
                     f"(retried automatically; {hint('retry')}).")
    if f.failed:
        notes.append(f"{count(len(f.failed), 'queued candidate', 'queued candidates')} failed and "
                     f"{'is' if len(f.failed) == 1 else 'are'} no longer retried automatically "
                     f"({f.failed[-1].removeprefix('failed: ')}); fix the setting, then {hint('retry')}.")
    notes.extend(m[0].upper() + m[1:] + "." for m in f.refused)  # a planted symlink: say what and why
    if f.conflicts:  # named: the user has a merge to finish, not a broken file
        notes.append(conflict_note(f.conflicts) + ".")
    if f.unreadable:
        notes.append(f"{count(f.unreadable, 'fact file')} could not be read ({hint('status')}).")
    return ("realmem: " + " ".join(notes)) if notes else None


def conflict_note(files: list[str]) -> str:
    """"Unresolved merge conflict in <files>: ...", the files as the user can open them."""
    return (f"Unresolved merge conflict in {', '.join(files)}: the last good version is served until "
            f"{'it is' if len(files) == 1 else 'they are'} resolved (edit out the <<<<<<< ======= >>>>>>> markers)")


# --- the human view of a trace ------------------------------------------------------------------

def render_trace(t: GateTrace, text: str | None = None) -> str:
    """The trace as people read it: ``realmem debug`` (with the outcome's ``text`` last) and
    ``realmem audit`` both print it through here."""
    out: list[str] = []
    c = t.candidate
    out.append(f"Candidate: {c.caption}")
    out.append(f"  scope {c.scope or '(judge decides)'} -> {c.scope_used or '?'}"
               f" · paths {', '.join(map(inline, c.stored_paths or [])) or '(store default)'}"
               f"{' · user requested' if c.user_requested else ''}")
    s = t.safety or SafetyTrace()
    out.append(f"Safety: {'ok' if s.ok and not s.findings else s.reason}")
    if t.duplicate is not None:
        d = t.duplicate
        out.append(f"Exact duplicate of [{d.id}] {d.caption} ({store_kind(d.store)})")
    e = t.embedding
    if e is not None:
        line = f"Embedding: {e.status}"
        if e.dims:
            line += f" · {e.dims} dims · {'cached' if e.cached else 'computed'}"
        if e.note:
            line += f" · {e.note}"
        out.append(line)
    if t.neighbours is not None:
        out.extend(_render_neighbours(t.neighbours))
    if t.judge is not None:
        out.extend(_render_judge(t.judge))
    dec = t.decision or DecisionTrace()
    out.append(f"Decision: {dec.action or '-'} · rule {dec.rule}")
    out.extend(f"  - {step}" for step in dec.steps)
    th = dec.details.thresholds if dec.details is not None else None
    if th:
        out.append("  thresholds: " + ", ".join(f"{k}={v}" for k, v in th.items()))
    reason = dec.reason or (reject_reason(dec.rule, dec.details) if dec.action == Action.REJECT else None)
    if reason:
        out.append(f"  reason: {reason}")
    u = t.urgency
    if u is not None:
        probs = ", ".join(f"{lvl}={u.probabilities.get(str(i), 0):.2f}" for i, lvl in enumerate(("low", "mid", "high")))
        conf = f" · confidence {u.confidence:.2f}" if u.confidence is not None else ""
        out.append(f"Path urgency: {u.score:.2f} -> {u.tier} ({probs}{conf}); would show: {u.would_store}")
    r = t.rewrite
    if r is not None:
        why = f" ({r.fallback_reason})" if r.fallback_reason else ""
        out.append(f"Rewrite ({r.mode}{', deterministic fallback' + why if r.used_fallback else ''}):")
        out.extend("  " + line for line in (r.diff or "(no change)").splitlines())
    if t.replanned:
        out.append("Note: the stores changed while judging; the decision was made again under the write lock.")
    if text is not None:
        out += ["", text]
    return "\n".join(out)


def _render_neighbours(ns: list[NeighbourTrace]) -> list[str]:
    out = [f"Neighbours ({len(ns)}; {sum(1 for n in ns if n.judged)} shown to the judge):"]
    if ns:
        out.append(f"  {'id':<22}  {'scope':<8} {'cos':>6} {'bm25 rank/score':>16} {'rrf':>7}  caption")
    for n in ns[:30]:
        cos = f"{n.cos:.3f}" if n.cos is not None else "-"
        bm = f"{n.bm25_rank}/{n.bm25:.3g}" if n.bm25_rank is not None and n.bm25 is not None else "-"
        mark = "*" if n.judged else " "
        out.append(f" {mark}{n.id:<22}  {n.scope:<8} {cos:>6} {bm:>16} {n.rrf:>7.4f}  {n.caption[:60]}")
    return out


def _render_judge(j: JudgeTrace) -> list[str]:
    if not j.configured:
        return ["Judge: not configured"]
    if j.error:
        return [f"Judge: {j.error}"]
    usage = f", {int(j.usage['total_tokens'])} tokens" if "total_tokens" in j.usage else ""
    who = j.judge if (j.judge or "").startswith("chat:") else j.model  # a System One trace names its model
    out = [f"Judge: {who} ({count(int(j.requests or 0), 'request')}{usage})"]
    for name, a in j.answers.items():
        if a.type == "choice":
            probs = ", ".join(f"{k}={v:.2f}" for k, v in sorted(a.probabilities.items(), key=lambda kv: -kv[1])[:5])
            out.append(f"  {name:<14} {a.choice} (p={a.p or 0.0:.2f}) [{probs}]")
        elif a.type == "score":
            probs = ", ".join(f"{k}={v:.2f}" for k, v in a.probabilities.items())
            out.append(f"  {name:<14} score {a.score or 0.0:.2f} (normalized {a.normalized or 0.0:.2f}) [{probs}]")
        else:
            out.append(f"  {name:<14} P(true)={a.p or 0.0:.2f}")
    return out
