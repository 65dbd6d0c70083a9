"""The application: opens REALMEM_HOME for a working directory and is the only writer.

The writer only appends and projects: ``open`` connects and catches the projections up;
registering stores, migrations and scans are use cases callers run (``observe.attach``).
Every change goes through ``emit``: under the write lease lock, first bring the fact files
in line with the log (a writer killed after its commit left them behind), then append the
events and apply them to the tables in one SQLite transaction, then write the fact files
through the file projector (``projections.projector``).

Writes are versioned, as event-sourced systems do them: a change is decided on the version
(``last_seq``) of the memory it read, and the append checks that version inside its
transaction, under the lease.  An edit, move, approval or forget of a memory that is gone is
refused ("not found"), so a forgotten memory never comes back.  The lease carries a fencing
generation: the append and every file write check it, so a holder paused past its lease
writes nothing, and the file projection's position is recorded only for files written.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import apsw
import attrs

from realmem.storage import db, faults, fsutil
from realmem.stores import ids
from realmem.config import Config, home_dir
# Re-exported: the names callers have always imported from here.
from realmem.errors import ChangedMeanwhile, LeaseLost, NotFound, RealmemError
from realmem.events import log
from realmem.events import types as ev
from realmem.events.types import Key
from realmem.storage.lock import LeaseLock, LockTimeout
from realmem.stores.project import GLOBAL, Project, detect, pin_shared_key, store_kind
from realmem.projections import files, queries, tables
from realmem.projections.projector import FILES, FileProjector, advance, position, table_only
from realmem.projections.state import Memory, State, apply, small_tables
from realmem.logs import get_logger

if TYPE_CHECKING:
    from realmem.clients.chat import ChatModel
    from realmem.events.types import Envelope

logger = get_logger("realmem")

ESCAPE_MEMO_SECONDS = 1.0  # a symlink swapped under a running process is noticed this soon

# table_only() events (the projector's: they never change a memory's text or location) need the
# SQLite write transaction but not the lease lock that orders fact-file writes.  Queue
# bookkeeping must be among them: a candidate is queued precisely when that lock is busy.


@functools.cache
def needs_memory() -> tuple[type[ev.Event], ...]:
    """Events that change an existing memory: refused when the memory is gone by the time they
    are appended (a forget won the race), so they never bring it back."""
    return ev.MemoryEdited, ev.MemoryMoved, ev.MemoryApproved, ev.MemoryForgotten


@functools.cache
def counts_only() -> tuple[type[ev.Event], ...]:
    """Events that only add to a memory's counters: appended with one UPDATE per memory instead
    of a load/apply/save pass over its whole row (a recall hit is written on every recall)."""
    return ev.RecallHit, ev.PathNotesShown, ev.Reinforced


class WriteBusy(RealmemError, LockTimeout):
    """The write lease stayed busy past gate.lockWaitSeconds.  A refusal the user sees (exit
    1, rpc code 1), never a traceback; ``remember`` queues its candidate instead."""

    def __init__(self, exc: LockTimeout) -> None:
        h = exc.holder
        who = f"pid {h['pid']} on {h['host']}" if h else "another process"
        RealmemError.__init__(self, f"busy: {who} is writing to realmem; nothing was changed, try again")
        self.holder = h


class Realmem:
    def __init__(self, home: Path, cwd: Path, *, session: str | None = None, config: Config | None = None) -> None:
        self.home = home
        self.cwd = cwd.resolve()
        self.session = session
        fsutil.private_dir(self.home)
        self.config = config or Config(home)
        self.db_path = home / "realmem.sqlite"
        self.conn = db.connect(self.db_path)
        ttl = float(self.config["gate.leaseSeconds"])
        self.lock = LeaseLock(self.db_path, "write", ttl=ttl, heartbeat=ttl / 6)
        self.project: Project | None = detect(self.cwd, home)
        self.store_dirs: dict[str, Path] = {}
        self.store_roots: dict[str, Path | None] = {}  # a project store's project root
        self._escapes: dict[str, tuple[float, str | None]] = {}  # store -> (when checked, store_escape)
        self.projector = FileProjector(self.conn, self.lock, self)
        self._reader: apsw.Connection | None = None
        # A front end's own chat model for the judge and rewriter (an MCP client's sampling),
        # set for the call that may use it; rewriter.url, when set, still wins.
        self.chat_model: ChatModel | None = None

    # --- opening ------------------------------------------------------------------------

    @classmethod
    def open(cls, home: str | Path | None = None, cwd: str | Path | None = None, *,
             session: str | None = None) -> "Realmem":
        """Connect and catch the projections up with the log; appends nothing.  Registering the
        stores visible from cwd, migrating a path-keyed store and scanning for outside changes
        are use cases that callers run (``observe.attach``)."""
        app = cls(home_dir(home), Path(cwd or os.getcwd()), session=session)
        app.catch_up_tables()
        app.heal_files()
        return app

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self.conn.close()

    def reader(self) -> apsw.Connection | None:
        """Another connection to the same database, for a read that runs on another thread
        beside this one (SQLite serialises the statements of one connection).  Opened on first
        use, kept until close.  None while this connection has a transaction open: the other
        sees only what is committed, not its writes."""
        if self.conn.in_transaction:
            return None
        if self._reader is None:
            self._reader = db.connect(self.db_path, migrate=False)
        return self._reader

    def __enter__(self) -> "Realmem":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def load_store_dirs(self) -> None:
        """Re-read the stores table (a registration or a replay rewrote it)."""
        rows = queries.store_locations(self.conn)
        self.store_dirs = {store: Path(d) for store, d, _ in rows}
        self.store_roots = {store: Path(root) if root else None for store, _, root in rows}
        self._escapes.clear()

    # --- views ---------------------------------------------------------------------------

    def visible_stores(self) -> list[str]:
        """Most specific first: shared, personal, global."""
        p = self.project
        return [p.shared_store, p.personal_store, GLOBAL] if p is not None else [GLOBAL]

    def store_for_scope(self, scope: str | None) -> str:
        scope = (scope or "shared").lower().replace("_", "-").replace(" ", "-")
        aliases = {"global": "global", "shared": "shared", "project-shared": "shared", "project": "shared",
                   "personal": "personal", "project-personal": "personal"}
        kind = aliases.get(scope)
        if kind is None:
            raise RealmemError(f"unknown scope {scope!r}: use global, shared or personal")
        if kind == "global":
            store = GLOBAL
        elif self.project is None:
            raise RealmemError("no project here: only the global scope is available")
        else:
            store = self.project.shared_store if kind == "shared" else self.project.personal_store
        if (escape := self.store_escape(store)) is not None:
            raise RealmemError(escape)
        return store

    def store_dir(self, store: str) -> Path:
        if store not in self.store_dirs:
            self.load_store_dirs()
        return self.store_dirs[store]

    def store_root(self, store: str) -> Path | None:
        """The project root of a shared or personal store (None for global or unknown)."""
        if store not in self.store_roots:
            self.load_store_dirs()
        return self.store_roots.get(store)

    def files_reachable(self, store: str) -> bool:
        """Whether this store's files can be projected here: a shared store lives inside its
        project, so when that checkout was deleted or moved its files are not recreated; a
        store whose directory resolves outside where it belongs is never read or written."""
        if not self._has_store(store) or self.store_escape(store):
            return False
        if store_kind(store) != "shared":
            return True
        return self.store_dirs[store].parent.parent.is_dir()

    def store_escape(self, store: str) -> str | None:
        """Why ``store``'s directory is refused, or None.  A shared store must resolve inside its
        project and a personal or global one inside REALMEM_HOME: git can commit a symlinked
        ``.pi/realmem`` pointing anywhere, and nothing may be imported from or written there."""
        if not self._has_store(store):
            return None
        now = time.monotonic()
        memo = self._escapes.get(store)
        if memo is not None and now - memo[0] < ESCAPE_MEMO_SECONDS:  # replay asks once per memory
            return memo[1]
        d = self.store_dirs[store]
        root = self.store_roots.get(store) if store_kind(store) == "shared" else self.home
        why = None
        try:
            real = Path(os.path.realpath(d, strict=True))
        except FileNotFoundError:  # not made yet: where it would be made
            real = Path(os.path.realpath(d))
        except OSError as exc:  # a symlink loop: it resolves nowhere
            real = None
            why = f"the {store_kind(store)} store {d} cannot be resolved ({exc.strerror}); refused: nothing there is read or written"
        if real is not None and root is not None and not real.is_relative_to(os.path.realpath(root)):
            why = f"the {store_kind(store)} store {d} resolves outside {root} (to {real}); refused: nothing there is read or written"
        self._escapes[store] = (now, why)
        return why

    def memory(self, key: Key) -> Memory | None:
        return queries.memory(self.conn, key)

    def memories(self, stores: Sequence[str] | None = None, *, include_quarantined: bool = False) -> list[Memory]:
        return queries.memories_in(self.conn, list(stores or self.visible_stores()),
                                   include_quarantined=include_quarantined)

    def counters(self, key: Key) -> tuple[int, int]:
        return queries.counters(self.conn, key)

    def resolve(self, value: str, stores: Sequence[str] | None = None, *, include_quarantined: bool = True) -> Key:
        """A short id, canonical id or unique prefix -> (store, id) among visible stores."""
        stores = list(stores or self.visible_stores())
        rows = queries.memory_keys(self.conn, stores, include_quarantined=include_quarantined)
        by_id: dict[str, str] = {}
        for store, mem_id in rows:
            by_id.setdefault(mem_id, store)  # visible_stores order: most specific wins
        try:
            mem_id = ids.resolve(value, by_id.keys())
        except ids.IdError as exc:
            raise RealmemError(str(exc)) from None
        return Key(by_id[mem_id], mem_id)

    # --- writing -------------------------------------------------------------------------

    def emit(self, events: Iterable[ev.Event], *, lock_timeout: float | None = None,
             expect: Mapping[Key, int] | None = None, on_disk: Iterable[Key] = (),
             seen: Mapping[str, Mapping[str, tuple[int, int] | None]] | None = None) -> list[Envelope]:
        """Append events and apply them to every projection.  Table-only events skip the lease
        lock (they never touch files); everything else holds it.  ``expect``: the version
        (``last_seq``) each memory had when the change was decided; a different one raises
        ChangedMeanwhile and appends nothing.  ``on_disk``: memories whose file already holds
        their new text under the same name (a scan read it there): their files are not
        rewritten, so an edit made since the scan read them is never overwritten.  ``seen``:
        per store, the file stats a scan read these events from (``FileProjector.record_seen``),
        recorded in the same transaction, so no reader sees the events without them."""
        events = list(events)
        if not events:
            return []
        if expect is None and not seen and all(isinstance(e, counts_only()) for e in events):
            return self._append_counts(events)
        if all(isinstance(e, table_only()) for e in events):
            return self._append_and_apply(events, seen=seen)[0]
        self._refuse_escaped(events)
        with self.write_lease(lock_timeout):
            events = self._claim_file_names(events)
            envs, before, after, keys = self._append_and_apply(events, expect=expect or {}, fenced=True, seen=seen)
            faults.point("after-commit")
            # Files a catch-up could not write (a read-only store) stay behind, so this
            # change's position must not pass them.
            if self.projector.apply(before, after, keys.difference(on_disk)) and not self.projector.behind:
                faults.point("before-position")
                self.projector.written_through(envs[-1].seq)
            shared = self.project.shared_store if self.project is not None else None
            if any(getattr(e, "store", None) == shared and not isinstance(e, (ev.FileObserved, ev.FileProblem))
                   for e in events):  # a fact realmem writes there, not one a scan read
                pin_shared_key(self.project)  # type: ignore[arg-type]
        return envs

    def _refuse_escaped(self, events: list[ev.Event]) -> None:
        """No change to a memory of a refused store (``store_escape``): its file could not be
        written, so the change would be undone by the next scan once the store is fixed."""
        for e in events:
            if isinstance(e, table_only()):
                continue
            for store, _ in e.keys():
                if (escape := self.store_escape(store)) is not None:
                    raise RealmemError(escape)

    @contextlib.contextmanager
    def write_lease(self, timeout: float | None = None, *, heal: bool = True) -> Iterator[None]:
        """Hold the write lease (reentrant), the file projection caught up with the log first:
        whichever process writes next heals what a killed writer left behind.  A lease still
        busy after ``timeout`` (default gate.lockWaitSeconds) raises WriteBusy.  ``heal=False``
        skips the catch-up, for a caller that rebuilds every projection from the log itself
        (replay: catching a lagging log up event by event first would only be thrown away)."""
        wait = float(self.config["gate.lockWaitSeconds"]) if timeout is None else timeout
        nested = self.lock.entered
        try:
            self.lock.acquire(wait)
        except LockTimeout as exc:
            raise WriteBusy(exc) from None
        try:
            if not nested:
                faults.point("lease-taken")
            if heal:
                self.catch_up_files()
            yield
        finally:
            self.lock.release()

    def heal_files(self) -> None:
        """On open: catch the fact files up if a writer left them behind, unless the lease is
        busy (its holder heals them before it writes; a reader is served from the tables)."""
        if self.projection_seq(FILES) >= self.projection_seq("tables"):
            return
        try:
            with self.write_lease(0):
                pass
        except WriteBusy:
            logger.info("files.heal_deferred", reason="write lease busy")

    def _append_counts(self, events: list[ev.Event]) -> list[Envelope]:
        """``_append_and_apply`` for counts_only() events: what ``state.apply`` does to them (add
        one to a counter of each memory that exists), written straight to the counters table."""
        with db.transaction(self.conn):
            self._catch_up_tables()
            files_current = self.projection_seq(FILES) >= self.projection_seq("tables")
            envs = []
            for e in events:
                envs.append(log.append(self.conn, e, session=self.session))
                column = "path_inject_count" if isinstance(e, ev.PathNotesShown) else "used_count"
                for store, mem_id in e.keys():
                    self.conn.execute(
                        f"INSERT INTO counters(store, id, used_count, path_inject_count) "
                        f"SELECT store, id, {int(column == 'used_count')}, {int(column != 'used_count')} "
                        f"FROM memories WHERE store=? AND id=? "
                        f"ON CONFLICT(store, id) DO UPDATE SET {column}={column}+1", (store, mem_id))
            advance(self.conn, "tables", envs[-1].seq)
            if files_current:
                advance(self.conn, FILES, envs[-1].seq)  # counters never touch files
        return envs

    def _claim_file_names(self, events: list[ev.Event]) -> list[ev.Event]:
        """File names are picked before the lock is taken, so another process may have used
        the same name since: under the lock, give a write whose name is now taken a fresh one
        (otherwise it would overwrite the other memory's file)."""
        out: list[ev.Event] = []
        claimed: set[tuple[str, str]] = set()
        for e in events:
            fields = getattr(e, "fields", None)
            if fields is None or not isinstance(e, (ev.MemoryAdded, ev.MemoryEdited, ev.MemoryMoved)):
                out.append(e)
                continue
            store = e.to_store if isinstance(e, ev.MemoryMoved) else e.store
            current = self.memory((store, e.id))
            if current is None or current.file != fields.file:
                other = queries.file_used_by_other(self.conn, store, fields.file, e.id)
                on_disk = self._has_store(store) and (self.store_dir(store) / fields.file).exists()
                if other or on_disk or (store, fields.file) in claimed:
                    taken = self.taken_names(store, exclude=e.id) | {f for s, f in claimed if s == store}
                    e = attrs.evolve(e, fields=attrs.evolve(fields, file=files.file_name(fields.caption, e.id, taken)))
            claimed.add((store, e.fields.file))
            out.append(e)
        return out

    def _append_and_apply(self, events: list[ev.Event], *, expect: Mapping[Key, int] | None = None,
                          fenced: bool = False, seen: Mapping[str, Mapping[str, tuple[int, int] | None]] | None = None,
                          ) -> tuple[list[Envelope], State, State, set[Key]]:
        keys: set[Key] = set()
        small: set[str] = set()
        for e in events:
            keys.update(e.keys())
            small.update(name for name, types in small_tables().items() if isinstance(e, types))
        expect = dict(expect or {})
        with db.transaction(self.conn):
            # The fence is read in this transaction, so no takeover can slip in before the commit.
            if fenced and self.lock.fenced(self.conn):
                raise LeaseLost("this process lost the write lease while it was paused; nothing was written, "
                                "try again")
            self._catch_up_tables()
            state = tables.load(self.conn, keys, small)
            before = State(memories={k: attrs.evolve(m) for k, m in state.memories.items()})  # Fields are frozen
            envs = log.append_many(self.conn, events, session=self.session)
            for env in envs:  # a version that fails its check rolls the appends back
                _check_version(state, env.event, expect)
                apply(state, env)
            tables.save(self.conn, state, keys, small)
            for store, stats in (seen or {}).items():
                self.projector.record_seen(store, stats)
            faults.point("before-commit")
            files_current = self.projection_seq(FILES) >= self.projection_seq("tables")
            advance(self.conn, "tables", envs[-1].seq)
            if files_current and all(isinstance(e, table_only()) for e in events):
                advance(self.conn, FILES, envs[-1].seq)  # nothing for the file step to do
        if "stores" in small:
            self.load_store_dirs()
        return envs, before, state, keys

    def projection_seq(self, name: str) -> int:
        return position(self.conn, name)

    def catch_up_tables(self) -> None:
        """Apply events the tables have not seen yet (opening the store heals a lagging log)."""
        if self.projection_seq("tables") < log.last_seq(self.conn):
            with db.transaction(self.conn):
                self._catch_up_tables()

    def _catch_up_tables(self) -> None:
        """Apply events appended but not yet applied (e.g. by an older version). Runs inside
        the caller's transaction, so the tables never lag the log once it commits."""
        done = self.projection_seq("tables")
        if done >= log.last_seq(self.conn):
            return
        for env in log.read(self.conn, done):
            keys = set(env.event.keys())
            small = {n for n, t in small_tables().items() if isinstance(env.event, t)}
            state = tables.load(self.conn, keys, small)
            apply(state, env)
            tables.save(self.conn, state, keys, small)
            advance(self.conn, "tables", env.seq)

    def catch_up_files(self) -> None:
        """Bring fact files in line with events whose file step did not run (a writer killed or
        fenced after its commit).  Needs the write lease."""
        self.catch_up_tables()
        self.projector.catch_up()

    def _has_store(self, store: str) -> bool:
        if store not in self.store_dirs:
            self.load_store_dirs()
        return store in self.store_dirs

    # --- building write events -----------------------------------------------------------

    def taken_names(self, store: str, exclude: str | None = None) -> set[str]:
        names = queries.file_names(self.conn, store, exclude=exclude)
        d = self.store_dir(store)
        if d.is_dir():
            names.update(p.name for p in d.glob("*.md"))
        return names

    def new_fields(self, store: str, mem_id: str, caption: str, content: str, paths: list[str], *,
                   created: str | None = None, file: str | None = None, previous: Memory | None = None) -> ev.Fields:
        now = log.now_iso()
        caption = " ".join(caption.split())
        content = content.strip("\n")
        created = created or (previous.created if previous else now)
        if file is None:
            keep = previous is not None and previous.store == store and \
                not files.renamed(previous.file, mem_id, previous.caption, caption)
            file = previous.file if keep else files.file_name(caption, mem_id, self.taken_names(store, exclude=mem_id))
        text = files.render(id=mem_id, caption=caption, paths=paths, created=created, updated=now, content=content,
                            previous=previous.text if previous is not None else None)
        return ev.Fields(caption, content, list(paths), created, now, file, text)


def _check_version(state: State, e: ev.Event, expect: dict[Key, int]) -> None:
    """Refuse an event decided on a version of its memory that is no longer current."""
    if not isinstance(e, needs_memory()):
        return
    key = (e.store, e.id)
    current = state.memories.get(key)
    if current is None:
        raise NotFound(f"memory {ids.short(e.id)} not found: it no longer exists (forgotten or moved meanwhile)")
    wanted = expect.pop(key, None)  # checked once: later events in the batch build on it
    if wanted is not None and current.last_seq != wanted:
        raise ChangedMeanwhile(f"memory {ids.short(e.id)} changed meanwhile; nothing was written, "
                               "look at it again and retry")
