"""Noticing fact files changed outside realmem (hand edits, git pull, another clone), and
attaching a working directory's stores to an opened writer.

A scan compares each store directory with the memories table and records what differs as
``FileObserved`` / ``FileProblem`` events carrying the file's content, so the change is
projected (and replayable) like any other.  A bad file is reported, never fatal.

``Realmem.open`` only connects and catches up; ``attach`` is the use case run after it
(``realmem.write.attached`` does both): register the stores visible from the working
directory, move a path-keyed personal store to its git key, and scan for outside changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path

import attrs

from realmem.app import Realmem, WriteBusy
from realmem.events import types as ev
from realmem.gcpause import gc_paused
from realmem.events import log
from realmem.events.log import now_iso
from realmem.projections import files, index
from realmem.projections.projector import FILES
from realmem.storage import db, fsutil
from realmem.storage.lock import LockTimeout
from realmem.logs import get_logger
from realmem.stores import ids
from realmem.stores import project as project_mod
from realmem.stores.project import GLOBAL, Project, default_path
from realmem.write import factfiles
from realmem.projections import queries

logger = get_logger("realmem.write.observe")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# A store with more files than this is not stat'ed file by file when a command opens it and
# its directory's mtime is what the last scan saw (a file added, removed or renamed into place,
# as editors and git do, changes it).  An edit written in place is caught by the next full
# scan: session start and the scan before realmem edits a memory.  Smaller stores are
# always stat'ed: it costs little on every command.
QUICK_OPEN_FILES = 500
# A directory mtime this close to the scan's start may still be followed by a change within the
# same timestamp tick (or a skewed network clock): such a stamp is not trusted next time.
_RACY_NS = 1_000_000_000
# A scan's events are appended in transactions of this many: a few big appends instead of one
# per file, yet short enough that another process's write (a session start's, a recall hit's)
# never waits long for a `git pull`'s thousands.  Each commit writes every index page its
# batch touched to the WAL, and new memories land all over the indexes keyed by content hash:
# larger batches share those pages, and write less WAL.  A crash keeps the batches committed;
# the files of the others are read again by the next scan (each batch records its files' stats).
EMIT_BATCH = 2000
_DIR_ROW = ""  # the file_stats row (file name "") holding the directory's stamp; no fact is named ""


@gc_paused()
def scan_stores(app: Realmem, stores: list[str] | None = None, *, wait: float = 0.0,
                full: bool = True) -> list[ev.Envelope]:
    """Scan the visible stores; returns the events recorded.

    The scan itself only reads.  A store whose files differ from the tables records the
    changes under the write lease.  There it is scanned again, its files first caught up with
    the log (so a file a killed writer never wrote is not taken for a deletion), unless the
    log, the tables and the files stayed where the first pass found them, all caught up.  When
    the lease stays busy for ``wait`` seconds the last projected state is served, and a later
    scan records it.
    ``full=False`` (opening a store) skips a large store whose directory has not changed
    since its last scan, and any store where no file changed.
    """
    out: list[ev.Envelope] = []
    # A pull's checkpoint runs on a thread, behind the scan of the other stores.
    with db.Checkpoints(app.conn) as behind:
        for store in stores or app.visible_stores():
            out.extend(_scan_and_record(app, store, wait, full, behind))
    return out


def _scan_and_record(app: Realmem, store: str, wait: float, full: bool,
                     checkpoints: db.Checkpoints) -> list[ev.Envelope]:
    """``scan_stores`` for one store; ``checkpoints``: makes the checkpoint after its batches."""
    out: list[ev.Envelope] = []
    dir_stamp = _dir_stamp(app, store)
    started = time.time_ns()
    if not full and dir_stamp != -1:
        if dir_stamp is not None and _unchanged(app, store, dir_stamp):
            return []  # a large store whose directory has not changed: nothing to read
        if backlog(app, [store]) == 0:
            # Nothing to read; a large store's stamp is recorded (once) so the next open
            # need not stat its files again.
            if dir_stamp is not None and _settled(dir_stamp, started) and _file_count(app, store) > QUICK_OPEN_FILES:
                with app.conn:
                    _record_dir(app, store, dir_stamp, started)
            return []
    reads = _Reads()
    positions = _positions(app)
    events, seen, on_disk = _scan_store(app, store, reads)
    if events:
        try:
            with app.write_lease(wait), db.one_checkpoint(app.conn, checkpoints), \
                    index.tokens_cached_at_end(app.conn), app.projector.one_flush():
                if store in app.projector.unwritable:
                    # Its files could not be caught up (read-only, full): a memory whose file was
                    # never written is not a deletion.  Scanned again once it is writable.
                    logger.warning("scan.deferred", store=store, reason=app.projector.unwritable[store])
                    return out
                if _positions(app) != positions or len(set(positions)) != 1:
                    # Again under the lease: the tables moved, or a killed writer's files were
                    # caught up (the first pass may have taken a file it never wrote for a
                    # deletion).  A file whose (inode, mtime, size) is what the first pass saw
                    # is not read, parsed or scanned twice.
                    events, seen, on_disk = _scan_store(app, store, reads)
                for i in range(0, len(events), EMIT_BATCH):
                    batch = events[i:i + EMIT_BATCH]
                    # Each batch records the stats of the files it observed, the last one all
                    # the others: no reader sees a scan's events without its file stats.
                    last = i + EMIT_BATCH >= len(events)
                    stats = seen if last else {n: seen.pop(n) for n in _files_of(batch) if n in seen}
                    out.extend(app.emit(batch, on_disk=on_disk, seen={store: stats}))
                if events:
                    seen = {}
        except LockTimeout:
            logger.info("scan.deferred", store=store, reason="write lease busy")
            return out
    with app.conn:
        app.projector.record_seen(store, seen)
        _record_dir(app, store, dir_stamp, started)
    return out


def before_write(app: Realmem, keys: list[ev.Key]) -> set[ev.Key]:
    """Call under the write lease before a change to existing memories is decided: a memory
    whose file is no longer what realmem last wrote or read there (a `git pull`, a checkout or
    another REALMEM_HOME renamed, changed or deleted it since this process looked) has its
    store scanned first, so the change is decided on what is on disk and never writes the old
    file back.  A long-lived process (a Pi session's rpc child) otherwise scans only at
    session start.  One stat and one row per memory; returns the memories found changed."""
    off = {k for k in dict.fromkeys(keys) if _file_changed(app, k)}
    if off:
        logger.info("write.observed_first", memories=len(off))
        scan_stores(app, sorted({k[0] for k in off}))
    return off


def _file_changed(app: Realmem, key: ev.Key) -> bool:
    m = app.memory(key)
    if m is None or not app.files_reachable(key[0]):
        return False
    seen = queries.file_stat(app.conn, key[0], m.file)
    try:
        st = os.lstat(app.store_dir(key[0]) / m.file)
    except OSError:
        return True  # gone (renamed or deleted), or unreadable: the scan says which
    return not stat.S_ISREG(st.st_mode) or (st.st_mtime_ns, st.st_size) != seen


def _positions(app: Realmem) -> tuple[int, int, int]:
    """The log's last event and how far the tables and the files have applied it: while these
    stay the same and equal, what a scan read from the tables still holds (they change only
    through the log; file_stats outside it only for files that need no event)."""
    return log.last_seq(app.conn), app.projection_seq("tables"), app.projection_seq(FILES)


def _files_of(events: list[ev.Event]) -> set[str]:
    """The names of the files a scan's events observed as facts."""
    return {e.fields.file for e in events if isinstance(e, ev.FileObserved) and e.fields is not None}


def _settled(dir_stamp: int, started: int) -> bool:
    return 0 < dir_stamp < started - _RACY_NS


def _file_count(app: Realmem, store: str) -> int:
    return queries.file_stat_count(app.conn, store, exclude=_DIR_ROW)


def _record_dir(app: Realmem, store: str, dir_stamp: int | None, started: int) -> None:
    """Record the directory's stamp (and how many files it held) once every file in it is
    recorded; a stamp too close to ``started`` is not trusted, so none is kept."""
    if dir_stamp is not None and _settled(dir_stamp, started):
        seen_dir: dict[str, tuple[int, int] | None] = {_DIR_ROW: (dir_stamp, _file_count(app, store))}
    else:
        seen_dir = {_DIR_ROW: None}
    app.projector.record_seen(store, seen_dir)


# Session start reads at most this many new or changed fact files before answering; a larger
# backlog (a `git pull` bringing thousands) is read by `realmem scan` in another process, so the first
# prompt is built from what is already projected and never waits for it.
SYNC_FILES = 300


def backlog(app: Realmem, stores: list[str] | None = None) -> int:
    """How many fact files a full scan would read (new, or size/mtime changed) or find gone:
    one directory listing and stat per file, nothing read.  Past ``SYNC_FILES`` new or gone
    files (a pull's thousands) the answer is already "in the background", so the count stops
    there: a store listing that many more files than it has recorded stats for is not
    compared name by name (reading a large store's recorded stats alone is slow; the count
    is then a floor, exact unless files also went), known files are not stat'ed,
    and gone files are not looked for once the new ones alone are past it."""
    pending = 0
    listed: list[tuple[Path, dict[str, tuple[int, int]], list[str]]] = []
    same: list[str] = []  # large stores whose directory stamp says no file came or went
    for store in stores or app.visible_stores():
        stamp = _dir_stamp(app, store)
        if stamp is not None and _unchanged(app, store, stamp):
            same.append(store)
            continue
        d, names = _names(app, store)
        ahead = len(names) - _file_count(app, store)
        if pending + ahead > SYNC_FILES:
            return pending + ahead
        stats = queries.file_stats(app.conn, store)  # its _DIR_ROW never matches a fact file's name
        present = set(names)
        pending += len(present.difference(stats))  # new: nothing to compare, no stat needed
        listed.append((d, stats, names))
        if pending > SYNC_FILES:
            return pending
        gone = queries.file_names(app.conn, store) | set(queries.file_problems(app.conn, store))
        pending += len(gone - present)  # gone: a memory to delete, a problem resolved
    if pending > SYNC_FILES:
        return pending
    for store in same:
        d, names = _names(app, store)
        listed.append((d, queries.file_stats(app.conn, store), names))
    for d, stats, names in listed:
        where = str(d)
        for name in names:
            seen = stats.get(name)
            if seen is None:
                continue
            try:
                st = os.stat(os.path.join(where, name))
            except OSError:
                pending += 1
                continue
            if seen != (st.st_mtime_ns, st.st_size):
                pending += 1
    return pending


def _names(app: Realmem, store: str) -> tuple[Path, list[str]]:
    """A store's directory and the names of its fact files now (names only: DirEntry
    objects cost more)."""
    d = app.store_dir(store)
    try:
        return d, [n for n in os.listdir(d) if n.endswith(".md") and not n.startswith(".")]
    except OSError:
        return d, []


def _dir_stamp(app: Realmem, store: str) -> int | None:
    """The store directory's mtime; None when it does not exist; -1 when it cannot be read
    (a loop, no permission): never trusted, the scan reports it."""
    try:
        return app.store_dir(store).stat().st_mtime_ns
    except FileNotFoundError:
        return None
    except OSError:
        return -1


def _unchanged(app: Realmem, store: str, dir_stamp: int) -> bool:
    row = queries.file_stat(app.conn, store, _DIR_ROW)
    return row is not None and row[0] == dir_stamp and row[1] > QUICK_OPEN_FILES


class _Reads:
    """What one scan read, kept for its second pass under the lease: each file's text by
    (name, inode, mtime, size), and the parse and safety verdict of each text."""

    def __init__(self) -> None:
        self.texts: factfiles.Texts = {}
        self.parsed: dict[str, files.Parsed | files.FactFileError] = {}
        self.quarantine: dict[tuple[str, str, tuple[str, ...]], str | None] = {}

    def parse(self, text: str) -> files.Parsed:
        got = self.parsed.get(text)
        if got is None:
            try:
                got = files.parse(text)
            except files.FactFileError as exc:
                got = exc
            self.parsed[text] = got
        if isinstance(got, files.FactFileError):
            raise got
        return got

    def scan(self, caption: str, content: str, paths: list[str]) -> str | None:
        """Why the fact is quarantined (the safety scan's reason), or None."""
        key = (caption, content, tuple(paths))
        if key not in self.quarantine:
            self.quarantine[key] = factfiles.quarantine_reason(caption, content, paths)
        return self.quarantine[key]

    def take(self, name: str, found: factfiles.Found) -> None:
        """What a helper found for the file ``name``."""
        if found is None:
            return
        ino, mtime_ns, size, text, parsed, quarantine = found
        self.texts[(name, ino, mtime_ns, size)] = text
        if parsed is not None:
            self.parsed[text] = parsed
            self.quarantine[(parsed.caption, parsed.content, tuple(parsed.paths))] = quarantine


def _scan_store(app: Realmem, store: str,
                reads: _Reads) -> tuple[list[ev.Event], dict[str, tuple[int, int] | None], set[ev.Key]]:
    """(events, file stats to record, memories whose file already holds their observed text)."""
    return StoreScan(app, store, reads).run()


class StoreScan:
    """One pass over a store's fact files, compared with its rows.  What the pass has found so
    far is on the object (the events, the file holding each id, the stats to record); each
    step is a method."""

    def __init__(self, app: Realmem, store: str, reads: _Reads) -> None:
        self.app, self.store, self.reads = app, store, reads
        self.d = app.store_dir(store)
        self.where = str(self.d)  # joined with each name: a Path converts itself every time
        self.root = self.d  # its real path, once listed
        self.known = queries.memory_files(app.conn, store)  # id -> file name; a text is read only to compare
        self.by_file = {f: mem_id for mem_id, f in self.known.items()}
        self.problems: dict[str, str] = {}
        self.kinds: dict[str, str] = {}
        for name, (digest, kind) in queries.file_problems(app.conn, store).items():
            self.problems[name], self.kinds[name] = digest, kind
        self.events: list[ev.Event] = []
        self.notices: list[ev.Event] = []  # told last: the file's FileObserved events clear its problems
        self.seen_ids: dict[str, str] = {}  # id -> the file holding it
        self.fine: set[str] = set()  # names that read as a fact this time
        self.unchanged: set[str] = set()  # known files untouched since realmem wrote or read them
        self.read_files: dict[str, tuple[str | None, str]] = {}  # name -> (updated, text) of each file read as a fact
        self.new_stats: dict[str, tuple[int, int] | None] = {}
        self.on_disk: set[ev.Key] = set()
        self.names: set[str] = set()  # the fact files listed
        self.stats: dict[str, tuple[int, int]] = {}  # file name -> (mtime_ns, size) recorded

    def run(self) -> tuple[list[ev.Event], dict[str, tuple[int, int] | None], set[ev.Key]]:
        listed = self._listed()
        if listed is not None:
            self._read_all(listed)
            self._deleted()
            self._resolved()
            self.events.extend(self.notices)
        return self.events, self.new_stats, self.on_disk

    def _listed(self) -> list[str] | None:
        """The names of the store's fact files; None when the store is not read (refused or
        unreadable, which is reported)."""
        escape = self.app.store_escape(self.store)
        if escape is not None:
            # Nothing there is read; its memories keep their last projected state.
            if self.problems.get("") != _digest(escape):
                logger.warning("store refused", store=self.store, reason=escape)
                self.events.append(ev.FileProblem(self.store, "", "store-escape", escape, None, _digest(escape)))
            return None
        try:
            return [n for n in os.listdir(self.d) if n.endswith(".md") and not n.startswith(".")]
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:  # a loop, no permission: report it and keep every memory as it was
            message = f"cannot list {self.d}: {exc.strerror}"
            if self.problems.get("") != _digest(message):
                self.events.append(ev.FileProblem(self.store, "", "unreadable", message, None, _digest(message)))
            logger.warning("store unreadable", store=self.store, error=message)
            return None

    def _read_all(self, listed: list[str]) -> None:
        self.root = Path(os.path.realpath(self.d))
        self.names = set(listed)
        new = sorted(n for n in listed if n not in self.by_file)
        # Many new files (a pull): a helper process reads them from the last one back, while this
        # one reads the known files' stamps and then the new files from the first one on.  A second
        # pass under the lease finds them all read.
        with factfiles.Helper(self.d, () if self.reads.texts else new) as helper:
            self.stats = queries.file_stats(self.app.conn, self.store)
            self.unchanged = _unchanged_files(self.d, [n for n in listed if n in self.by_file], self.stats)

            # Most of a full scan: the files realmem wrote or read, untouched since.  Each holds its
            # own memory's id, so they take their ids first; then the others, known files first.
            for name in self.unchanged:
                self.seen_ids[self.by_file[name]] = name
            self.fine.update(self.unchanged)
            changed = sorted(n for n in listed if n in self.by_file and n not in self.unchanged)
            for i, name in enumerate((*changed, *new)):
                if i >= len(changed):
                    self.reads.take(name, helper.take(i - len(changed)))
                try:
                    self.one(name)
                except Exception as exc:  # one file must never stop the others or the command
                    logger.exception("fact file scan failed", store=self.store, file=name)
                    self.problem(name, "unreadable", f"{name}: cannot be read as a fact ({type(exc).__name__}: {exc})",
                                 None, _digest(repr(exc)))
                    self._keep_last_good(name, self.by_file.get(name))

    def _deleted(self) -> None:
        """A known memory whose id no file holds now is deleted."""
        for mem_id, name in self.known.items():
            if mem_id not in self.seen_ids:
                self.events.append(ev.FileObserved(self.store, mem_id, "deleted"))
                if name not in self.fine:  # else another memory now lives in that file
                    self.new_stats[name] = None

    def _resolved(self) -> None:
        """A recorded problem is resolved when its file is gone or reads as a fact again, and no
        event of this scan tells of that file already."""
        events = self.events
        handled = {e.file for e in events if isinstance(e, ev.FileProblem)}
        handled.update(e.fields.file for e in events if isinstance(e, ev.FileObserved) and e.fields is not None)
        handled.update(self.known[e.id] for e in events if isinstance(e, ev.FileObserved) and e.fields is None)
        for name in self.problems:
            told = self.kinds.get(name) == "re-identified" and name in self.unchanged  # stays until the file changes
            if name not in handled and (name not in self.names or name in self.fine) and not told:
                events.append(ev.FileProblem(self.store, name, "resolved", f"{name} is gone or readable again",
                                             None, ""))

    def problem(self, name: str, kind: str, message: str, line: int | None, digest: str) -> None:
        if self.problems.get(name) != digest:
            self.events.append(ev.FileProblem(self.store, name, kind, message, line, digest))
            logger.warning("fact file problem", store=self.store, file=name, problem=kind, line=line)

    def _keep_last_good(self, name: str, mem_id: str | None) -> None:
        """A file that does not read as a fact: its memory keeps its last good version."""
        if mem_id is not None:
            self.seen_ids[mem_id] = name

    def claim(self, mem_id: str, holder: str) -> tuple[str | None, str]:
        """(updated, text) of the file that took ``mem_id`` first: read by this scan, or
        unchanged since realmem wrote or read it (the memory's own text)."""
        if holder in self.read_files:
            return self.read_files[holder]
        m = self.app.memory((self.store, mem_id))
        return (m.updated, m.text) if m is not None else (None, "")

    def displace(self, holder: str, mem_id: str, name: str) -> None:
        """``name`` is a newer version of the fact ``holder`` took first: it takes the id, and
        ``holder`` is reported as the copy (kept on disk for the user; never deleted)."""
        self.events[:] = [e for e in self.events if not (isinstance(e, ev.FileObserved) and e.id == mem_id)]
        self.on_disk.discard(ev.Key(self.store, mem_id))
        self.fine.discard(holder)
        self.unchanged.discard(holder)
        self.new_stats[holder] = None  # read again next time, as the copy it now is
        self.problem(holder, "duplicate-id", f"{holder} repeats the id of {name}; ignored", 2,
                     _digest(self.claim(mem_id, holder)[1]))
        own = self.by_file.get(holder)
        if own is not None and own != mem_id:
            self.seen_ids.setdefault(own, holder)  # the file's own memory keeps its last good version

    def same(self, name: str, mem_id: str) -> None:
        """A known file unchanged since realmem last read or wrote it."""
        self.seen_ids[mem_id] = name
        self.fine.add(name)
        self.unchanged.add(name)

    def one(self, name: str) -> None:
        """Read the file ``name`` and record what differs from its memory's row."""
        mem_id = self.by_file.get(name)
        try:
            st, text = factfiles.read(self.where, name, self.root, None if mem_id is None else self.stats.get(name),
                                      self.reads.texts)
        except factfiles.BadFile as bad:
            self.problem(name, bad.kind, bad.describe(name), bad.line, _digest(bad.describe(name)))
            if bad.kind not in ("symlink-escape", "not-a-file"):
                self._keep_last_good(name, mem_id)
            return
        stamp = (st.st_mtime_ns, st.st_size)
        if text is None:  # unchanged since realmem last read or wrote it
            assert mem_id is not None
            self.same(name, mem_id)
            return
        conflict = files.conflict_line(text)
        if conflict is not None:
            # Neither side nor the markers are served: the memory keeps the version this checkout
            # had before the merge (as for a malformed file), and the file is left to the user.
            self.problem(name, "conflict", f"{name} has an unresolved merge conflict (line {conflict}); "
                         "its last good version is served until it is resolved", conflict, _digest(text))
            self._keep_last_good(name, mem_id)
            return
        got = self._parse(name, mem_id, text)
        if got is None:
            return
        parsed, text, restored, parsed_from_disk = got
        assert parsed.id is not None
        holder = self.seen_ids.get(parsed.id)
        if holder is not None:
            # One id in two files (a stale write, two homes on one checkout): the newer version
            # (a later ``updated``) keeps it, whichever home scans, and the other is reported.  A
            # tie (a plain copy, hand-written twins) keeps the file that took the id first.
            if not _later(parsed.updated, self.claim(parsed.id, holder)[0]):
                self.problem(name, "duplicate-id", f"{name} repeats the id of {holder}; ignored", 2, _digest(text))
                if mem_id is not None:
                    self.seen_ids.setdefault(mem_id, name)  # the file's own memory keeps its last good version
                return
            self.displace(holder, parsed.id, name)
        self._observed(name, parsed, text, stamp, restored, parsed_from_disk, displaced=holder is not None)

    def _parse(self, name: str, mem_id: str | None, text: str) -> tuple[files.Parsed, str, bool, bool] | None:
        """The fact in ``text``, the text to record (with an id written in when the file has
        none), whether that id is the file's own memory's, and whether the text is the file's
        as it is on disk; None when it is malformed (reported)."""
        restored, parsed_from_disk = False, True
        try:
            parsed = self.reads.parse(text)
            if parsed.id is None:
                parsed_id, notice = _identify(self.app, self.store, name, parsed, mem_id, self.seen_ids, self.names)
                if notice is not None:
                    self.notices.append(ev.FileProblem(self.store, name, "re-identified", notice, None, _digest(text)))
                    logger.warning("fact file re-identified", store=self.store, file=name)
                now = now_iso()
                text = files.render(id=parsed_id, caption=parsed.caption,
                                    paths=parsed.paths or [default_path(self.store)],
                                    created=parsed.created or now, updated=parsed.updated or now,
                                    content=parsed.content, previous=text)
                parsed = files.parse(text)
                restored, parsed_from_disk = parsed_id == mem_id, False
        except files.FactFileError as exc:
            self.problem(name, "malformed", f"{name}: {exc}", exc.line, _digest(text))
            self._keep_last_good(name, mem_id)
            return None
        return parsed, text, restored, parsed_from_disk

    def _observed(self, name: str, parsed: files.Parsed, text: str, stamp: tuple[int, int], restored: bool,
                  parsed_from_disk: bool, *, displaced: bool) -> None:
        """``name`` holds ``parsed`` (``text`` as it is to be recorded): an event unless the
        tables already agree."""
        store, mem_id = self.store, parsed.id
        assert mem_id is not None
        self.seen_ids[mem_id] = name
        self.read_files[name] = (parsed.updated, text)
        self.fine.add(name)
        current = self.known.get(mem_id)
        if current == name and queries.memory_text(self.app.conn, (store, mem_id)) == text:
            if restored:  # only the id line was deleted: put it back (the tables already agree)
                files.write(self.d, name, text)
                st = os.stat(self.d / name)
                stamp = (st.st_mtime_ns, st.st_size)
            self.new_stats[name] = stamp
            return
        now = "" if parsed.created and parsed.updated else now_iso()  # the clock only for a file missing either
        caption, content, fact_paths = parsed.caption, parsed.content, parsed.paths or [default_path(store)]
        quarantine = self.reads.scan(parsed.caption, parsed.content, parsed.paths)
        if quarantine is not None:  # a committed secret: masked before the log or a table holds it
            caption, content, fact_paths, safe = factfiles.masked(caption, content, fact_paths, text)
            if safe != text:  # the file is rewritten as the log holds it (git shows the secret go)
                text, parsed_from_disk = safe, False
                if current == name and queries.memory_text(self.app.conn, (store, mem_id)) == text:
                    self.new_stats[name] = stamp  # masked the same way before: nothing new to record
                    return
        fields = ev.Fields(caption, content, fact_paths, parsed.created or now, parsed.updated or now, name, text)
        self.events.append(ev.FileObserved(store, mem_id, "changed" if current else "added", fields, quarantine))
        if parsed_from_disk:  # else the file is rewritten with its new id, and emit records that
            self.new_stats[name] = stamp
            if current is None or current == name or displaced:  # no other file of it for emit to remove
                self.on_disk.add(ev.Key(store, mem_id))
        if quarantine:
            logger.warning("fact file quarantined", store=store, file=name, reason=quarantine)


def _later(updated: str | None, than: str | None) -> bool:
    """Whether a fact file's ``updated`` time is strictly later (realmem writes one fixed ISO
    form, so the strings compare as times; a file without one is never later)."""
    return updated is not None and (than is None or updated > than)


def _unchanged_files(d: Path, names: list[str], stats: dict[str, tuple[int, int]]) -> set[str]:
    """The ``names`` that are regular files, not symlinks, whose (mtime_ns, size) is what
    ``stats`` recorded.  Each is stat'ed relative to the directory: the kernel resolves one
    name instead of the whole path."""
    out: set[str] = set()
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return out  # each file is then read, and what is wrong reported, one by one
    try:
        for name in names:
            seen = stats.get(name)
            if seen is None:
                continue
            try:
                st = os.lstat(name, dir_fd=fd)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and (st.st_mtime_ns, st.st_size) == seen:
                out.add(name)
    finally:
        os.close(fd)
    return out


def _identify(app: Realmem, store: str, name: str, parsed: files.Parsed, old_id: str | None,
              seen_ids: dict[str, str], present: set[str]) -> tuple[str, str | None]:
    """The id of a fact file without one, and a notice when the user should be told.

    A hand-written fact simply gets a new id.  When the file held a memory (its id line was
    deleted), that memory keeps its identity if the fact is the same (caption and content);
    otherwise it becomes a new memory and the user is told plainly.  A file renamed as well
    keeps the identity of the memory with the same fact whose file is gone."""
    if old_id is None:  # renamed as well?  The same fact whose own file is gone is that memory
        h = ev.content_hash(parsed.caption, parsed.content)
        for mem_id, file in queries.files_with_hash(app.conn, store, h):
            if mem_id not in seen_ids and file not in present:
                return mem_id, None
        return ids.new_id(), None
    if old_id in seen_ids:
        return ids.new_id(), None
    old = app.memory((store, old_id))
    if old is not None and (old.caption, old.content) == (parsed.caption, parsed.content):
        return old_id, None
    new_id = ids.new_id()
    return new_id, (f"{name} lost its id line and its fact changed, so it was re-identified: memory "
                    f"{ids.short(old_id)} is replaced by {ids.short(new_id)} (its use counts start again)")


REKEYED_FILE = "rekeyed.json"  # in the new personal store: what moved, told once at session start


def move_personal_store(app: Realmem, project: Project, old_key: str) -> int:
    """Move the personal memories kept under ``old_key`` to the project's key, leave a note
    for the next session start to tell the user, and return how many moved."""
    old_store = f"personal:{old_key}"
    rows = queries.memory_ids(app.conn, old_store)
    if not rows:
        return 0
    new_store = project.personal_store
    events: list[ev.Event] = []
    taken = app.taken_names(new_store)
    for mem_id in rows:
        mem = app.memory((old_store, mem_id))
        assert mem is not None
        name = mem.file if mem.file not in taken else files.file_name(mem.caption, mem_id, taken)
        taken.add(name)
        fields = attrs.evolve(mem.fields, file=name)
        events.append(ev.MemoryMoved(old_store, mem_id, new_store, fields, "project-key"))
    app.emit(events)
    logger.info("personal memories re-keyed", old=old_store, new=new_store, count=len(events))
    old_dir = app.store_dir(old_store)
    try:
        (old_dir / "project.json").unlink(missing_ok=True)
        old_dir.rmdir()
    except OSError:
        pass
    if not old_key.startswith("path-"):  # a first commit is expected; a changed git key is news
        moved = rekeyed(app, project) or {"count": 0}
        note = {"from": old_key, "to": project.key, "count": moved["count"] + len(events)}
        fsutil.atomic_write_text(app.store_dir(new_store) / REKEYED_FILE, json.dumps(note) + "\n")
    return len(events)


def rekeyed(app: Realmem, project: Project) -> dict | None:
    """The note a key change left in the personal store (``from``, ``to``, ``count``), if any."""
    try:
        note = json.loads((app.store_dir(project.personal_store) / REKEYED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) and isinstance(note.get("count"), int) else None


# --- attaching a working directory's stores -------------------------------------------------

def attach(app: Realmem, *, scan: bool = True) -> Realmem:
    """Register the stores visible from the app's working directory (with their current
    directories), move a personal store left under an old key of the project to its key, and with ``scan`` record
    outside changes (large unchanged stores are not stat'ed file by file).  Returns ``app``."""
    register_stores(app)
    if app.project is not None and app.project.key.startswith("git-"):
        rekey_personal(app, app.project)
    if scan:
        scan_stores(app, full=False)
    return app


def register_stores(app: Realmem) -> None:
    """Make sure the stores visible from cwd are registered with their current dirs."""
    # (store, kind, dir, project key, root): events are made only for what changed (making the
    # event classes slows a read-only command's start-up).
    wanted: list[tuple[str, str, str, str | None, str | None]] = [
        (GLOBAL, "global", str(app.home / "global"), None, None)]
    p = app.project
    if p is not None:
        wanted.append((p.shared_store, "shared", str(p.shared_dir), p.key, str(p.root)))
        wanted.append((p.personal_store, "personal", str(app.home / "personal" / p.key), p.key, str(p.root)))
    app.load_store_dirs()
    known = queries.store_registrations(app.conn)
    new = [ev.StoreRegistered(*w) for w in wanted if known.get(w[0]) != w[1:]]
    if new:
        app.emit(new)
    if p is not None:
        _write_project_json(app, p)


def _write_project_json(app: Realmem, p: Project) -> None:
    if app.store_escape(p.personal_store):
        return
    f = app.home / "personal" / p.key / "project.json"
    data = {"key": p.key, "root": str(p.root), "name": p.root.name}
    try:
        if json.loads(f.read_text(encoding="utf-8")) == data:
            return
    except (OSError, ValueError):
        pass
    fsutil.atomic_write_text(f, json.dumps(data, indent=2) + "\n")


def rekey_personal(app: Realmem, p: Project) -> None:
    """Personal memories and queued candidates kept under an old key of this project follow it
    to its key (deferred while the write lease is busy): the path key, after the first commit;
    a git key that this checkout used before and whose commit is in its history now (a
    shallow clone since unshallowed, a key file lost after an amended root or a merge)."""
    old_keys = [p.path_key] + [
        key for store, (kind, _d, key, root) in queries.store_registrations(app.conn).items()
        if kind == "personal" and root == str(p.root) and key and key.startswith("git-") and key != p.key
        and queries.has_memories(app.conn, store) and project_mod.in_history(p.root, key)]
    for old_key in old_keys:
        try:
            if queries.has_memories(app.conn, f"personal:{old_key}"):
                with app.write_lease(0):  # only when there is something to move
                    move_personal_store(app, p, old_key)
        except WriteBusy:
            logger.info("rekey.deferred", project_key=p.key, reason="write lease busy")
        _rekey_pending(app, p, old_key)


def _rekey_pending(app: Realmem, p: Project, old_key: str) -> None:
    """Queued candidates follow the project to its key, as the personal store does."""
    rows = queries.pending_ids(app.conn, old_key)
    if rows:
        app.emit([ev.CandidateMoved(cid, p.key, str(p.root)) for cid in rows])
        logger.info("queue.rekeyed", old=old_key, project_key=p.key, count=len(rows))
