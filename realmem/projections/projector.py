"""The file projector: makes each store's fact files say what the tables say.

Live writes (``Realmem.emit``), the catch-up after a writer was killed or fenced, a full
replay and a scan's bookkeeping all go through one ``FileProjector``, the only code that
writes ``file_stats`` (the size and mtime of each file as realmem last wrote or read it, so a
scan need not re-read it).

Integrity, in every path: a live file write first checks the lease's fencing generation (a
holder paused past its lease writes nothing), a rename writes the new file before the old one
goes, a file is deleted only while it still holds that memory (a hand-made file reusing the
name survives), and the ``files`` position is recorded only once every file is written.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Protocol

import apsw

from realmem.events import log
from realmem.events import types as ev
from realmem.events.types import Key
from realmem.projections import files
from realmem.projections.state import Memory, State
from realmem.projections.tables import MEMORY_COLS, memory_from_row
from realmem.storage import db, faults, fsutil
from realmem.logs import get_logger
from realmem.storage.lock import LeaseLock

logger = get_logger("realmem")


@functools.cache
def table_only() -> tuple[type[ev.Event], ...]:
    """Events that never change a memory's text or location: they only touch tables, so the
    file step has nothing to do for them.  (A function, like the other event-class sets: the
    classes are made on first use, ``events/types.py``.)"""
    return (ev.RecallHit, ev.PathNotesShown, ev.Reinforced, ev.Decided, ev.CandidateQueued, ev.CandidateRetried,
            ev.CandidateDone, ev.UrgencyJudged, ev.PathsChecked, ev.ContextImported, ev.ImportStarted,
            ev.ImportEnded, ev.FileProblem, ev.CandidateMoved, ev.StoreRegistered)

FILES = "files"  # the file projection's row in projection_state
# A file stamp this recent may hide a change written within the same clock tick (the scan's
# rule too): a rebuild reads and compares such a file, never trusting its stamp.
SETTLED_NS = 1_000_000_000
BATCH_FSYNC = 8  # a change writing more memories' files than this flushes them once


def position(conn: apsw.Connection, name: str) -> int:
    """How far the projection ``name`` (``tables``, ``files``) has applied the log."""
    row = conn.execute("SELECT seq FROM projection_state WHERE name=?", (name,)).fetchone()
    return row[0] if row else 0


def advance(conn: apsw.Connection, name: str, seq: int) -> None:
    """Record that ``name`` has applied the log up to ``seq`` (never moves it back)."""
    conn.execute(
        "INSERT INTO projection_state(name, seq) VALUES (?,?) ON CONFLICT(name) DO UPDATE SET seq=max(seq, excluded.seq)",
        (name, seq),
    )


class Stores(Protocol):
    """Where each store's files live, as the writer knows it (registered stores, refused ones)."""

    def store_dir(self, store: str) -> Path: ...

    def files_reachable(self, store: str) -> bool: ...


def _file_changes(old: Memory | None, new: Memory | None) -> bool:
    """A change the memory's file must follow.  An unchanged one is never rewritten: someone
    may have edited the file since the last scan."""
    if old is None or new is None:
        return old is not new
    return (old.file, old.text) != (new.file, new.text)


class FileProjector:
    def __init__(self, conn: apsw.Connection, lock: LeaseLock, stores: Stores) -> None:
        self.conn = conn
        self.lock = lock
        self.stores = stores
        self.flush_upto: int | None = None  # inside ``one_flush``: the seq its flush will record
        self.unflushed: list[str] = []  # files written without an fsync, for the next flush
        # Stores whose files could not be written (store -> why, one line), and the files of
        # this process's own changes among them: what the front end tells the user.
        self.unwritable: dict[str, str] = {}
        self.unwritten: list[str] = []
        self.behind = False  # the last catch-up left files unwritten: no live write may move the position

    # --- live writes -----------------------------------------------------------------------

    def apply(self, before: State, after: State, keys: Iterable[Key]) -> bool:
        """Write the files of a committed change; False if the lease was lost on the way or a
        file could not be written (the rest is left to the next writer's catch-up, and the
        position stays behind).  The
        caller then records the position with ``written_through``."""
        # Only memories whose file or text changed are written: a scan's batch of files already
        # on disk writes none, and then flushes nothing either.
        keys = [k for k in keys if _file_changes(before.memories.get(k), after.memories.get(k))]
        if not keys:
            return True
        # A large batch (a pull's hand-written facts getting their ids) is flushed once at the
        # end, as replay does, instead of an fsync per file; the files' position is recorded
        # only after this returns, so a crash before the flush is healed by catch-up.  Inside
        # ``one_flush`` such a batch waits for its single flush.
        deferred = self.flush_upto is not None
        durable = len(keys) <= BATCH_FSYNC
        ok = False
        try:
            ok = self._write(before, after, keys, durable)
            return ok
        finally:
            if not durable and not deferred:  # inside ``one_flush`` they wait for its flush
                self._flush()
            if deferred and not ok:
                self.flush_upto = -1  # a batch left files unwritten: no position at the end

    def written_through(self, seq: int) -> None:
        """Every change's files up to ``seq`` are written: record the position now, or inside
        ``one_flush`` once they are flushed at its end."""
        if self.flush_upto is None:
            advance(self.conn, FILES, seq)
        elif self.flush_upto >= 0:
            self.flush_upto = seq

    @contextlib.contextmanager
    def one_flush(self) -> Iterator[None]:
        """Changes made inside (a scan's batches, under one lease) write their files without a
        flush each and leave the position alone; at the end one flush, then the position of
        the last change whose files were all written (a flush per batch slowed
        observing a pull).  Until then this process's catch-up counts those files as written;
        a crash before the end leaves the position behind, and the next writer writes them
        again."""
        if self.flush_upto is not None:  # nested: the outer one flushes
            yield
            return
        self.flush_upto = 0
        try:
            yield
            upto = self.flush_upto
        finally:
            self.flush_upto = None
        if upto > 0:
            if self.unflushed:  # batches of files already on disk wrote none: nothing to flush
                self._flush()
                faults.point("scan-flushed")
            advance(self.conn, FILES, upto)

    def _put(self, d: Path, name: str, text: str, durable: bool) -> bool:
        """``files.write``; a file written without an fsync waits for the next ``_flush``."""
        if not files.write(d, name, text, durable=durable):
            return False
        if not durable:
            self.unflushed.append(f"{d}/{name}")
        return True

    def _flush(self) -> None:
        fsutil.flush_written(self.unflushed)
        self.unflushed.clear()

    def _write(self, before: State, after: State, keys: list[Key], durable: bool) -> bool:
        # The stats of the files written, recorded together at the end (one statement, not a
        # commit per file); a crash before that only makes the next scan read them again.
        written: dict[str, dict[str, tuple[int, int] | None]] = {}
        complete = True
        try:
            for key in keys:
                old, new = before.memories.get(key), after.memories.get(key)
                at = new or old
                try:
                    if new is not None:
                        if not self.fence_ok(new.store, new.file):
                            return False
                        d = self.stores.store_dir(new.store)
                        self._put(d, new.file, new.text, durable)
                        if (stamp := _stamp(d / new.file)) is not None:
                            written.setdefault(new.store, {})[new.file] = stamp
                        faults.point("after-file")
                    # A rename (new caption) or move: the new file exists before the old one goes, so a
                    # crash in between leaves the memory readable (catch-up removes the old name).
                    if old is not None and (new is None or (new.store, new.file) != (old.store, old.file)):
                        at = old
                        if not self.fence_ok(old.store, old.file):
                            return False
                        if self.delete_file(old.store, old.file, old.id):
                            written.get(old.store, {}).pop(old.file, None)
                        faults.point("after-file")
                except OSError as exc:  # the change is committed: its file waits for a writable store
                    self.unwritten.append(self._cannot_write(at.store, at.file, exc))
                    complete = False
            return complete
        finally:
            for store, stamps in written.items():
                self.record_seen(store, stamps)

    def fence_ok(self, store: str, name: str) -> bool:
        """Right before a file write: the lease is still ours (fencing generation), so no newer
        writer can have written since; a lost lease stops this process's file writes."""
        if not self.lock.fenced():
            return True
        logger.warning("write.fenced", store=store, file=name, generation=self.lock.generation,
                       reason="write lease lost (paused past its ttl); the next writer projects this change")
        return False

    def catch_up(self) -> None:
        """Bring fact files in line with events whose file step did not run (a writer killed or
        fenced after its commit); the tables must be caught up already.  Needs the write lease;
        writes each memory's current text, never an older one, and records the position only
        once every file is written."""
        done, upto = max(position(self.conn, FILES), self.flush_upto or 0), position(self.conn, "tables")
        if done >= upto:
            self.behind = False
            self.unwritable.clear()
            self.unwritten.clear()  # written since (a long-lived process must not keep them)
            return
        keys: set[Key] = set()
        for env in log.read(self.conn, done, until=upto):
            if not isinstance(env.event, table_only()):  # these never touch files
                keys.update(env.event.keys())
        # Many files (a lagging log) are flushed once before the position moves, as ``apply`` does.
        durable = len(keys) <= BATCH_FSYNC
        failed: dict[str, str] = {}
        try:
            for key in sorted(keys):
                if not self.stores.files_reachable(key[0]):
                    continue
                row = self.conn.execute(f"SELECT {MEMORY_COLS} FROM memories WHERE store=? AND id=?", key).fetchone()
                mem = memory_from_row(row) if row else None
                name = mem.file if mem is not None else self.last_file_name(key)
                if name is None:
                    continue
                if not self.fence_ok(key[0], name):
                    return
                try:
                    if mem is not None:
                        self._put(self.stores.store_dir(key[0]), mem.file, mem.text, durable)
                        self.record_stat(key[0], mem.file)
                        for old_name in self.file_names(key):  # a rename the crash interrupted
                            if old_name != mem.file:
                                self.delete_file(key[0], old_name, key[1])
                    else:
                        self.delete_file(key[0], name, key[1])
                except OSError as exc:  # read-only or full: the next writer tries again
                    if key[0] not in failed:
                        failed[key[0]] = self._cannot_write(key[0], name, exc)
        finally:
            self._flush()
        # Only the stores that still fail stay marked: a scan must not take their missing files
        # for deletions (``observe``).
        self.unwritable = failed
        self.behind = bool(failed)
        if not failed:
            self.unwritten.clear()
        if failed:
            if self.flush_upto is not None:
                self.flush_upto = -1  # inside ``one_flush``: no position at its end either
            return
        self.written_through(upto)

    def _cannot_write(self, store: str, name: str, exc: OSError) -> str:
        """Note that ``store``'s file ``name`` could not be written or removed; the one line."""
        path = exc.filename if exc.filename and not os.path.basename(str(exc.filename)).startswith(".") \
            else self.stores.store_dir(store) / name  # the temp file's name means nothing to the user
        why = f"{path}: {exc.strerror or exc}"
        self.unwritable[store] = why
        logger.warning("write.file_failed", store=store, file=name, error=why,
                       reason="the change is recorded; its file is written once the store is writable")
        return why

    # --- replay ----------------------------------------------------------------------------

    def known_stamps(self, state: State) -> dict[tuple[str, str], tuple[int, int]]:
        """(store, file) -> the (mtime_ns, size) recorded when realmem last wrote or read that
        file, for memories a rebuild leaves as they were: same file and same last event (the
        event that wrote the fields: both rows hold its text; ``rebuild`` also checks the size
        against the text).  A file still showing that stamp holds that text (the scan skips it
        on the same evidence), so a rebuild need not read it again.  Only rows the file
        projection has reached count (a killed writer may have left a later row's file
        unwritten, its stamp still that of the text before).  Read before the tables are
        rebuilt, from the ``memories_scope`` index alone: reading the rows themselves (their
        texts) is slower."""
        out: dict[tuple[str, str], tuple[int, int]] = {}
        for store, mem_id, name, seq, mtime_ns, size in self.conn.execute(
                "SELECT m.store, m.id, m.file, m.last_seq, s.mtime_ns, s.size FROM memories m "
                "JOIN file_stats s ON s.store = m.store AND s.file = m.file WHERE m.last_seq <= ?",
                (position(self.conn, FILES),)):
            mem = state.memories.get((store, mem_id))
            if mem is not None and (mem.file, mem.last_seq) == (name, seq):
                out[(store, name)] = (mtime_ns, size)
        return out

    def rebuild(self, state: State, names: Mapping[Key, set[str]], last: int, *,
                known: Mapping[tuple[str, str], tuple[int, int]] | None = None,
                settled: int = 0) -> tuple[int, int]:
        """Make every reachable store's files match ``state`` (the whole log folded, its tables
        already written; ``names``: every file name each memory ever had, from the fold): write
        each memory's file, remove names it had before and files of memories that are gone,
        then reset ``file_stats`` and record the position ``last``.
        A file whose stamp is in ``known`` (``known_stamps``), older than ``settled`` (ns) and
        of the text's size is trusted without reading it.  Returns (files written, deleted)."""
        known = known or {}
        written = deleted = 0
        stats: dict[tuple[str, str], tuple[int, int]] = {}
        reachable: dict[str, bool] = {}
        dirs: dict[str, tuple[Path, str]] = {}
        for key in names:  # in no order: each file is its own (sorting a large store's keys costs time)
            store = key[0]
            if store not in reachable:  # asked once per store: it may stat the project root
                reachable[store] = self.stores.files_reachable(store)
            if not reachable[store]:
                continue
            mem = state.memories.get(key)
            if mem is not None:
                if store not in dirs:
                    d = self.stores.store_dir(store)
                    dirs[store] = (d, str(d))
                d, where = dirs[store]
                f = mem.fields
                at = (store, f.file)
                path = f"{where}/{f.file}"  # a str: a Path per memory cost more than its stat (the name has no /)
                stamp = _stamp(path)
                if stamp is None or known.get(at) != stamp or stamp[0] >= settled \
                        or stamp[1] != len(f.text.encode("utf-8")):
                    if self._put(d, f.file, f.text, durable=False):
                        written += 1
                    stamp = _stamp(path)
                if stamp is not None:
                    stats[at] = stamp
                had = names.get(key)
                if had and had != {f.file}:  # renamed once: its old names may still be on disk
                    for name in self.old_names(names, mem):
                        if self.delete_file(store, name, mem.id):
                            deleted += 1
            else:
                name = self.last_file_name(key)
                if name and self.delete_file(store, name, key[1]):
                    deleted += 1
        self._flush()  # one flush for all files (deletions flushed their directory already)
        with db.transaction(self.conn):
            # file_stats becomes ``stats``; only the rows that differ are written (a replay of a
            # store whose files were all in step writes none, not every row).
            recorded = {(r[0], r[1]): (r[2], r[3]) for r in
                        self.conn.execute("SELECT store, file, mtime_ns, size FROM file_stats")}
            changed: dict[str, dict[str, tuple[int, int] | None]] = {}
            for at in recorded.keys() - stats.keys():
                changed.setdefault(at[0], {})[at[1]] = None
            for at, stamp in stats.items():
                if recorded.get(at) != stamp:
                    changed.setdefault(at[0], {})[at[1]] = stamp
            for store, seen in changed.items():
                self.record_seen(store, seen)
            advance(self.conn, FILES, last)
        return written, deleted

    def old_names(self, names: Mapping[Key, set[str]], mem: Memory) -> list[str]:
        """Names the memory had before in its store (``names``: from a fold of the log) that
        still exist on disk."""
        d = self.stores.store_dir(mem.store)
        return sorted(n for n in names.get((mem.store, mem.id), ())
                      if n != mem.file and (d / n).exists() and not self.reported_copy(mem.store, n))

    # --- files and their stats -------------------------------------------------------------

    def delete_file(self, store: str, name: str, mem_id: str) -> bool:
        """Remove a memory's file, but only if it still holds that memory (a hand-made file
        reusing the name must survive).  True if a file was removed."""
        if not self.holds(store, name, mem_id) or self.reported_copy(store, name):
            return False
        files.delete(self.stores.store_dir(store), name)
        self.conn.execute("DELETE FROM file_stats WHERE store=? AND file=?", (store, name))
        return True

    def reported_copy(self, store: str, name: str) -> bool:
        """Whether the file is reported as repeating another file's id: an older version of
        its memory that a newer file displaced (``observe``), the user's to sort out, never
        removed as a name the memory left behind."""
        return self.conn.execute("SELECT 1 FROM problems WHERE store=? AND file=? AND problem='duplicate-id'",
                                 (store, name)).fetchone() is not None

    def holds(self, store: str, name: str, mem_id: str) -> bool:
        """Whether the file ``name`` in ``store`` is a fact file of this memory."""
        try:
            path = self.stores.store_dir(store) / name
            return files.parse(fsutil.read_regular(path, limit=files.MAX_FILE_BYTES).decode("utf-8")).id == mem_id
        except (OSError, UnicodeDecodeError, files.FactFileError):
            return False

    def record_stat(self, store: str, name: str) -> None:
        """Remember the file's size and mtime so a scan need not re-read what we wrote."""
        try:
            st = (self.stores.store_dir(store) / name).stat()
        except OSError:
            return
        self.record_seen(store, {name: (st.st_mtime_ns, st.st_size)})

    def record_seen(self, store: str, seen: Mapping[str, tuple[int, int] | None]) -> None:
        """Record (mtime_ns, size) per file name as a scan read and accepted it (None: forget
        the entry), so the next scan skips what has not changed.  One statement for all."""
        gone = [(store, name) for name, st in seen.items() if st is None]
        kept = [(store, name, *st) for name, st in seen.items() if st is not None]
        if gone:
            self.conn.executemany("DELETE FROM file_stats WHERE store=? AND file=?", gone)
        if kept:
            self.conn.executemany(
                "INSERT INTO file_stats VALUES (?,?,?,?) ON CONFLICT(store, file) DO UPDATE SET "
                "mtime_ns=excluded.mtime_ns, size=excluded.size", kept)

    # --- the names a memory's files had ----------------------------------------------------

    def last_file_name(self, key: Key) -> str | None:
        """The file name this memory last had in this store: the latest event that wrote its
        fields into ``key[0]`` (a move out of the store wrote them into the other store)."""
        names = self.file_names(key)
        return names[-1] if names else None

    def file_names(self, key: Key) -> list[str]:
        """Every file name this memory had in ``key[0]``, oldest first (renames and moves)."""
        out = []
        for env in log.own(self.conn, key[1]):
            e = env.event
            fields = getattr(e, "fields", None)
            if fields is not None and (getattr(e, "to_store", None) or e.store_id) == key[0]:
                out.append(fields.file)
        return out


def _stamp(path: Path | str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size
