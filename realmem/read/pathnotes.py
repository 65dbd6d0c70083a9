"""Path notes: memories shown automatically when a tool touches the paths they are about.

Runs after every tool call, so the rpc child keeps a ``PathIndex`` of every path-scoped
memory warm and rebuilds it only when the log has moved on.  Urgency decides how much is
shown: High the full fact, Mid (or not judged yet) the caption with its id, Low only a count.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from realmem.read import freshness
from realmem.read.escape import inline
from realmem.stores import frames, ids, paths
from realmem.app import Realmem
from realmem.projections.urgency import tier, urgency_key_of, urgency_scores
from realmem.events import types as ev
from realmem.events.types import Key
from realmem.projections import queries
from realmem.words import count

WHOLE = {".", "~"}
PATH_KEYS = {"path", "paths", "file", "files", "file_path", "filepath", "filename", "dir", "directory", "cwd",
             "target", "source", "destination", "dest", "src", "notebook_path"}


def touched_paths(tool_name: str, tool_input: Any, *, cwd, home) -> list[str]:  # type: ignore[no-untyped-def]
    """Absolute paths a tool call touched: path-like arguments of any tool, plus words of
    bash commands that exist on disk."""
    out: list[str] = []
    if isinstance(tool_input, dict):
        for k, v in tool_input.items():
            if k.lower() in PATH_KEYS or k.lower().endswith("path"):
                for raw in ([v] if isinstance(v, str) else v if isinstance(v, list) else []):
                    if isinstance(raw, str) and raw.strip():
                        try:
                            out.append(paths.normalize_input(raw, cwd=cwd, home=home))
                        except paths.PathError:
                            pass
        command = tool_input.get("command")
        name = tool_name.lower()  # Pi says "bash", Claude Code "Bash"
        if isinstance(command, str) and ("bash" in name or "shell" in name):
            out.extend(paths.touched_paths_from_bash(command, cwd=cwd, home=home))
    seen: set[str] = set()
    return [p for p in out if not (p in seen or seen.add(p))]


MEMORY_EVENTS = (ev.MemoryAdded, ev.MemoryEdited, ev.MemoryForgotten, ev.MemoryMoved, ev.FileObserved,
                 ev.MemoryApproved, ev.StoreRegistered)
_VERSION_SQL = "SELECT max(s) FROM (" + " UNION ALL ".join(
    f"SELECT max(seq) AS s FROM events WHERE type='{t.TYPE}'" for t in MEMORY_EVENTS) + ")"


def memories_version(app: Realmem) -> int:
    """The seq of the last event that changed a memory; counter events (which every shown
    note appends) leave it alone, so the index is not rebuilt after each tool call."""
    return app.conn.execute(_VERSION_SQL).fetchone()[0] or 0


@attrs.define
class Entry:
    key: Key
    caption: str
    content: str
    paths: list[str]
    store_paths: list[str]
    urgency_key: str  # what a current urgency judgement must be valid for
    fresh: freshness.Subject


ENTRIES_KEPT = 2048  # entries a NoteIndex keeps read (a few MB at most)


class NoteIndex:
    """Where every path-scoped memory in the visible stores applies: its absolute patterns in a
    ``PathIndex`` under the key store NUL id, and nothing else.  Its text, paths and freshness
    subject are read when a tool call touches it (``load``), so the rpc child holds neither
    the facts nor an object per memory of a large store."""

    def __init__(self) -> None:
        self.seq = -1
        self.index = paths.PathIndex()
        # (store, stored path) -> its absolute pattern: a path many memories share is resolved
        # once and its text kept once; ``load`` resolves from it too (one entry per distinct
        # path, not per memory, so a large store's path notes stay as quick as a small one's).
        self.resolved: dict[tuple[str, str], str | None] = {}
        # Index key -> its entry as ``load`` read it, for the next touches of the same paths
        # (an agent reads and edits the same files again and again); dropped with the index.
        self.entries: dict[str, Entry] = {}

    def refresh(self, app: Realmem) -> None:
        seq = memories_version(app)
        if seq == self.seq:
            return
        index = paths.PathIndex()
        resolved: dict[tuple[str, str], str | None] = {}  # a store registered anew may resolve differently
        home = frames.user_home()
        for store, mem_id, stored in queries.path_scoped_paths(app.conn, app.visible_stores()):
            k = index_key((store, mem_id))
            for p in json.loads(stored):
                if p not in WHOLE and (a := freshness.resolve(app, store, p, home, resolved)) is not None:
                    index.add(k, a)
        self.index, self.resolved, self.seq, self.entries = index, resolved, seq, {}

    def load(self, app: Realmem, keys: Iterable[str]) -> list[Entry]:
        """The full entries of these index keys, in their order, as their rows are since the
        refresh (no memory changed since, or it would have rebuilt); one gone since (forgotten
        by another process meanwhile) is left out."""
        keys = list(keys)
        unread = [k for k in keys if k not in self.entries]
        if unread:
            if len(self.entries) + len(unread) > ENTRIES_KEPT:
                self.entries = {}
            self.entries.update((index_key(e.key), e) for e in self._read(app, unread))
        return [self.entries[k] for k in keys if k in self.entries]

    def _read(self, app: Realmem, keys: list[str]) -> list[Entry]:
        wanted = [key_of(k) for k in keys]
        ids_ = sorted({key[1] for key in wanted})
        rows: dict[Key, tuple[str, str, list[str], str, str | None]] = {}
        for start in range(0, len(ids_), 500):  # only the columns a note and its freshness use: no file text
            chunk = ids_[start:start + 500]
            for store, mem_id, caption, content, paths_json, updated, file in app.conn.execute(
                    f"SELECT store, id, caption, content, paths, updated, file FROM memories "
                    f"WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                rows[Key(store, mem_id)] = (caption, content, json.loads(paths_json), updated, file)
        home = frames.user_home()
        out = []
        for key in wanted:
            row = rows.get(key)
            if row is not None:
                caption, content, stored, updated, file = row
                fresh = freshness.Subject.of_row(app, key, stored, updated, file, home, self.resolved)
                out.append(Entry(key, caption, content, [a for _, a in fresh.patterns],
                                 [p for p in stored if p not in WHOLE], urgency_key_of(content, stored), fresh))
        return out

    def match(self, touched: Iterable[str]) -> dict[str, int]:
        """entry key -> best specificity among its patterns that match a touched path."""
        best: dict[str, int] = {}
        for t in touched:
            for k, pattern in self.index.match_patterns(t):
                s = paths.specificity(pattern)
                if s > best.get(k, -1):
                    best[k] = s
        return best


def index_key(key: tuple[str, str]) -> str:
    """A memory's key in the index: store NUL id."""
    return f"{key[0]}\0{key[1]}"


def key_of(k: str) -> Key:
    """The memory of an index key (``index_key``)."""
    store, _, mem_id = k.rpartition("\0")
    return Key(store, mem_id)


@attrs.define
class Notes:
    text: str | None
    # Ids done with on this branch: seen in full or as a caption, or only counted for good
    # (Low urgency, or too big for any limit).  A High or Mid note the limits pushed into the
    # count is not among them, so the next touch of its paths shows it.
    shown: list[str]
    touched: list[str]


def path_notes(app: Realmem, note_index: NoteIndex, *, tool_name: str, tool_input: Any, shown: Iterable[str],
               record: bool = True, counter: Callable[[ev.PathNotesShown], None] | None = None) -> Notes:
    """The notes for one tool call.  ``counter``: when given, the counter event of the notes
    shown goes to it instead of being appended now (the rpc child appends them together once
    it is idle: no answer waits for them)."""
    touched = touched_paths(tool_name, tool_input, cwd=app.cwd, home=frames.user_home())
    if not touched:
        return Notes(None, [], [])
    note_index.refresh(app)
    matched = note_index.match(touched)
    if not matched:
        return Notes(None, [], touched)
    already = set(shown)
    cand = [(k, s) for k, s in matched.items() if ids.short(key_of(k)[1]) not in already]
    if not cand:
        return Notes(None, [], touched)
    used = queries.used_counts(app.conn, [key_of(k) for k, _ in cand])
    store_rank = {s: i for i, s in enumerate(app.visible_stores())}
    cand.sort(key=lambda ks: (-ks[1], -used.get(key_of(ks[0]), 0), store_rank.get(key_of(ks[0])[0], 9), ks[0]))
    entries = note_index.load(app, [k for k, _ in cand])
    scores = urgency_scores(app, [(e.key, e.urgency_key) for e in entries])
    cfg = app.config
    max_full, max_caps, budget = int(cfg["pathNotes.maxFull"]), int(cfg["pathNotes.maxCaptions"]), int(cfg["pathNotes.charBudget"])
    high, mid = float(cfg["pathNotes.high"]), float(cfg["pathNotes.mid"])
    tiers = {e.key: tier(scores[e.key], high, mid) for e in entries}
    flags = _Flags(app, [e for e in entries if tiers[e.key] != "count"])
    full: list[tuple[Entry, str]] = []  # with the block shown
    caps: list[tuple[Entry, str]] = []
    counted: list[Entry] = []
    settled: list[Entry] = []  # counted and done with: Low urgency, or too big for any limit
    spent = 0
    for e in entries:
        t = tiers[e.key]
        if t == "count":
            counted.append(e)
            settled.append(e)
            continue
        free_full, free_caps = max(0, max_full - len(full)), max(0, max_caps - len(caps))
        if not (free_full * (t == "full") + free_caps):
            # Only counted now: its flag matters only if it alone might not fit the budget.
            room = len(_caption(e)) + _FLAG_ROOM + len(_paths(e.store_paths))
            if (t == "full" and max_full > 0 and room + len(e.content) + 2 <= budget) or \
                    (max_caps > 0 and room <= budget):
                counted.append(e)  # fits a limit whatever its flag says: it comes back
                flags.skip(e)
                continue
        block_cap = _caption(e, flags.of(e, free_full + free_caps))
        block_full = _full(e, block_cap)
        if t == "full" and len(full) < max_full and spent + len(block_full) <= budget:
            full.append((e, block_full))
            spent += len(block_full)
            continue
        if len(caps) < max_caps and spent + len(block_cap) <= budget:
            caps.append((e, block_cap))
            spent += len(block_cap)
            continue
        counted.append(e)
        # A High or Mid note pushed out by the limits is not shown: it comes back at the next
        # touch of its paths.  One that no limit would ever let through is done, like a Low one.
        fits_full = t == "full" and max_full > 0 and len(block_full) <= budget
        fits_caption = max_caps > 0 and len(block_cap) <= budget
        if not (fits_full or fits_caption):
            settled.append(e)
    shown_now = [e for e, _ in (*full, *caps)]
    if record and shown_now:
        event = ev.PathNotesShown([e.key for e in shown_now], touched[:20], tool_name)
        if counter is None:
            app.emit([event])
        else:
            counter(event)
    return Notes(_text(full, caps, counted), [ids.short(e.key[1]) for e in (*shown_now, *settled)], touched)


def _text(full: list[tuple[Entry, str]], caps: list[tuple[Entry, str]], counted: list[Entry]) -> str:
    """The notes block: the full notes, the captions, then a line counting the rest."""
    lines = ["<realmem-path-notes>"]
    lines.extend(block for _, block in (*full, *caps))
    if caps:
        lines.append("(read a caption's fact with realmem_recall ids=[...])")
    if counted:
        n = len(counted)
        where = sorted({p for e in counted for p in e.store_paths})[:5]
        lines.append(f"{count(n, 'more memory is', 'more memories are')} attached to {_paths(where)}: "
                     f"realmem_recall paths=[...] lists them.")
    lines.append("</realmem-path-notes>")
    return "\n".join(lines)


_FLAG_ROOM = len("\n⚠  changed in 1234567+ commits since 2026-01-01; verify before relying on it")


class _Flags:
    """The freshness flags of a call's notes in their order, read for as many notes at a time
    as could still be shown: a note past every limit is only counted, and its flag is read
    only when the flag alone might make it too big for the budget.  Never waits for git: a
    history not read yet is read in the background (no flags meanwhile)."""

    def __init__(self, app: Realmem, notes: list[Entry]) -> None:
        self.app, self.notes, self.next = app, notes, 0  # notes before ``next`` are read or skipped
        self.flags: dict[Key, str] = {}
        self.pos = {e.key: i for i, e in enumerate(notes)}

    def of(self, e: Entry, ahead: int) -> str | None:
        i = self.pos[e.key]
        if i >= self.next:
            batch = self.notes[i:i + max(1, ahead)]
            self.flags.update(freshness.flags_text(self.app, [n.fresh for n in batch], wait=False))
            self.next = i + len(batch)
        return self.flags.get(e.key)

    def skip(self, e: Entry) -> None:
        self.next = max(self.next, self.pos[e.key] + 1)


def _full(e: Entry, caption: str) -> str:
    """The full note: its caption block (``_caption``), then the content."""
    return f"{caption}\n{e.content}\n"


def _caption(e: Entry, flag: str | None = None) -> str:
    head = f"[{ids.short(e.key[1])}] {e.caption} ({_paths(e.store_paths)})"
    return f"{head}\n⚠ {flag}" if flag else head


def _paths(stored: list[str]) -> str:
    """Paths as a note shows them: escaped (``escape.inline``), comma-separated."""
    return ", ".join(map(inline, stored))


def attached_counts(app: Realmem, limit: int = 20) -> list[tuple[str, int]]:
    """Paths that have path notes with how many memories each ("db (4)")."""
    counts: dict[str, int] = {}
    for stored, n in queries.path_counts(app.conn, app.visible_stores()):
        for p in json.loads(stored):
            if p not in WHOLE:
                counts[p] = counts.get(p, 0) + n
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


def dumps(notes: Notes) -> dict[str, Any]:
    return {"text": notes.text, "shown": notes.shown, "touched": notes.touched}


