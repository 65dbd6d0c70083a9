"""Lease lock in SQLite: one writer at a time across every Pi process sharing realmem.sqlite.

SQLite's own write lock only covers a single transaction; realmem's writes span a transaction
plus file renames, so they need a longer-lived lock.  A row in ``locks`` names the holder
(``owner`` token, pid, host).  The holder renews ``heartbeat`` from a background thread; a row
whose heartbeat is older than its ``ttl`` is free, and so is one whose holder process is dead
on this host, so a crashed or killed Pi never blocks the others for long: every Pi process
has its own rpc child, and the worker and the hook server write too.

The owner token is ``"<pid>:<starttime>:<uuid>"``.  The process start time (from
``/proc/<pid>/stat``) tells a dead holder from a new process that reused its pid.

Each take of a lease gets the next *generation* (a fencing token, kept across releases in
``lease_generations``).  A holder that was paused past its ttl may still believe it holds the
lease when it resumes; ``fenced`` asks the database whether the row still carries our owner
and generation, so a writer checks it right before each write it must not make late.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw

from realmem.storage.db import connect, transaction
from realmem.errors import Error
from realmem.logs import get_logger

log = get_logger(__name__)

HOST = os.uname().nodename  # what socket.gethostname() returns, without importing socket (start-up time)

_POLL_MIN = 0.005
_POLL_MAX = 0.05

# Databases already migrated by this process: later connections skip the migration check.
_MIGRATED: set[str] = set()
# Connections inherited across fork.  Closing them in the child could disturb the parent's
# SQLite locks and WAL, so the child keeps them referenced and never touches them.
_FORK_ORPHANS: list[apsw.Connection] = []
_INSTANCES: weakref.WeakSet[LeaseLock] = weakref.WeakSet()


class LockTimeout(Error, TimeoutError):
    """The lease stayed with another holder for the whole timeout.

    ``holder`` describes that holder (``LeaseLock.holder()``) so the caller can queue its work
    and tell the user who is writing.
    """

    def __init__(self, message: str, holder: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.holder = holder


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, starttime) of ``pid`` from /proc, or None where /proc is unavailable."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; it ends at the last ')'.
    fields = data[data.rindex(b")") + 2 :].split()
    return fields[0].decode(), fields[19].decode()


def _start_time(pid: int) -> str:
    stat = _proc_stat(pid)
    return stat[1] if stat else ""


def _new_owner() -> str:
    pid = os.getpid()
    return f"{pid}:{_start_time(pid)}:{uuid.uuid4().hex}"


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (one owned by another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder_dead(owner: str, pid: int, host: str) -> bool:
    """True only when the holder provably no longer runs: same host, and its pid is gone, a
    zombie, or now belongs to a different process (start time differs from the token)."""
    if host != HOST:
        return False
    if pid != os.getpid() and not pid_alive(pid):
        return True
    stat = _proc_stat(pid)
    if stat is None:
        return False
    state, started = stat
    if state in ("Z", "X"):  # killed but not yet reaped by its parent
        return True
    token_pid, _, rest = owner.partition(":")
    token_start = rest.partition(":")[0]
    return token_pid == str(pid) and token_start != "" and token_start != started


class _Heartbeat:
    """Renews one held lease until stopped; notices when another process took it over."""

    def __init__(
        self, conn: apsw.Connection, name: str, owner: str, interval: float
    ) -> None:
        self._conn = conn
        self._name = name
        self._owner = owner
        self._pid = os.getpid()
        self._interval = interval
        self._stop = threading.Event()
        self.lost = False
        self._thread = threading.Thread(
            target=self._run, name=f"realmem-lease-{name}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing; after this returns no renewal is in flight."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._conn.execute(
                    "UPDATE locks SET heartbeat=? WHERE name=? AND owner=? AND pid=?",
                    (time.time(), self._name, self._owner, self._pid),
                )
                renewed = self._conn.changes() > 0
            except apsw.BusyError:
                # Another connection's write transaction (often this process's own: a replay
                # holds one for seconds) outlasted the wait; retried next tick.  A holder whose
                # transactions can outlast the ttl renews inside them (``LeaseLock.renew``).
                log.info("lock.heartbeat_deferred", name=self._name, reason="database busy")
                continue
            except apsw.Error as exc:
                # Retried next tick; if this lasts past the ttl the lease may be taken over,
                # which the next successful renewal reports.
                log.warning("lock.heartbeat_failed", name=self._name, error=str(exc))
                continue
            if not renewed:
                if not self._stop.is_set():
                    self.lost = True
                    log.error(
                        "lock.lost",
                        name=self._name,
                        owner=self._owner,
                        reason="lease taken over by another holder (heartbeat expired)",
                    )
                return


class LeaseLock:
    """A named lease in the ``locks`` table of ``db_path``, reentrant per thread.

    One object may be shared by threads: they exclude each other like ``threading.RLock``.
    Separate objects, in one process or many, exclude each other through the table.
    ``owner`` overrides the generated ``"pid:starttime:uuid"`` token; it must be unique to
    the holder, since a row is only ever ours when both the token and the pid match.
    """

    def __init__(
        self,
        db_path: Path,
        name: str = "write",
        *,
        ttl: float = 30.0,
        heartbeat: float = 5.0,
        owner: str | None = None,
    ) -> None:
        if ttl <= 0 or heartbeat <= 0:
            raise ValueError("ttl and heartbeat must be positive")
        if heartbeat >= ttl:
            raise ValueError("heartbeat must be shorter than ttl, or a live lease expires")
        self._db_path = Path(db_path)
        self._name = name
        self._ttl = float(ttl)
        self._heartbeat_interval = float(heartbeat)
        self._fixed_owner = owner
        self._init_process_state()
        _INSTANCES.add(self)

    def _init_process_state(self) -> None:
        """Everything that belongs to one process; rebuilt in a forked child."""
        self._pid = os.getpid()
        self._owner = self._fixed_owner or _new_owner()
        self._gate = threading.Lock()  # excludes threads sharing this object
        self._db_lock = threading.Lock()  # serialises use of self._conn
        self._conn: apsw.Connection | None = None
        self._hb_conn: apsw.Connection | None = None
        self._owner_thread: int | None = None
        self._count = 0
        self._lease: _Heartbeat | None = None
        self.generation = 0  # the fencing token of the current (or last) take

    def _after_fork(self) -> None:
        """A forked child never holds its parent's lease, nor uses its connections."""
        if self._pid == os.getpid():
            return
        _FORK_ORPHANS.extend(c for c in (self._conn, self._hb_conn) if c is not None)
        self._init_process_state()

    def _connect(self) -> apsw.Connection:
        key = str(self._db_path.resolve())
        conn = connect(self._db_path, migrate=key not in _MIGRATED)
        _MIGRATED.add(key)
        # A lease's writes are a row each: the connections writing data make the checkpoints
        # (a release after a pull's batches took the pull's checkpoint, meant for a thread
        # behind the caller, db.Checkpoints, back onto the caller's).
        conn.execute("PRAGMA wal_autocheckpoint=0")
        return conn

    def _main_conn(self) -> apsw.Connection:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    @property
    def held(self) -> bool:
        """True if the calling thread holds the lease and it has not been taken over."""
        self._after_fork()
        lease = self._lease
        return (
            self._owner_thread == threading.get_ident()
            and lease is not None
            and not lease.lost
        )

    @property
    def entered(self) -> bool:
        """True if the calling thread acquired the lease and has not released it yet, even if
        it was taken over meanwhile (``held`` is then False): a nested acquire is reentrant."""
        self._after_fork()
        return self._owner_thread == threading.get_ident()

    def fenced(self, conn: apsw.Connection | None = None) -> bool:
        """True when the calling thread may no longer write as this lease's holder: it does not
        hold it, or the row no longer carries our owner and generation (taken over after we
        were paused past the ttl).  ``conn``: check inside that connection's open transaction,
        which makes the check and the caller's write one atomic step."""
        self._after_fork()
        if self._owner_thread != threading.get_ident() or self._lease is None:
            return True
        query = "SELECT 1 FROM locks WHERE name=? AND owner=? AND pid=? AND generation=?"
        args = (self._name, self._owner, self._pid, self.generation)
        if conn is not None:
            return conn.execute(query, args).fetchone() is None
        with self._db_lock:
            return self._main_conn().execute(query, args).fetchone() is None

    def renew(self, conn: apsw.Connection) -> bool:
        """Renew the heartbeat inside ``conn``'s open write transaction, committed with it.  The
        renewal thread waits behind such a transaction (SQLite has one writer): one longer than
        the ttl would end with the lease looking expired, free for another process to take while
        this one still writes files.  False when the row is no longer ours (taken over before
        the transaction began): the caller rolls back."""
        self._after_fork()
        if self._owner_thread != threading.get_ident() or self._lease is None:
            return False
        conn.execute("UPDATE locks SET heartbeat=? WHERE name=? AND owner=? AND pid=? AND generation=?",
                     (time.time(), self._name, self._owner, self._pid, self.generation))
        return conn.changes() > 0

    def holder(self) -> dict[str, Any] | None:
        """The current row (whoever holds it), with ``held_for`` seconds, for status display."""
        self._after_fork()
        with self._db_lock:
            row = self._main_conn().execute(
                "SELECT owner, pid, host, acquired, heartbeat, ttl FROM locks WHERE name=?",
                (self._name,),
            ).fetchone()
        if row is None:
            return None
        owner, pid, host, acquired, beat, ttl = row
        now = time.time()
        return {
            "name": self._name,
            "owner": owner,
            "pid": pid,
            "host": host,
            "acquired": acquired,
            "heartbeat": beat,
            "ttl": ttl,
            "held_for": max(0.0, now - acquired),
            "heartbeat_age": max(0.0, now - beat),
        }

    def _try_take(self, busy_ms: int) -> bool:
        """One attempt in one IMMEDIATE transaction; True if the row is now ours."""
        with self._db_lock:
            conn = self._main_conn()
            conn.set_busy_timeout(busy_ms)
            try:
                with transaction(conn):
                    row = conn.execute(
                        "SELECT owner, pid, host, heartbeat, ttl FROM locks WHERE name=?",
                        (self._name,),
                    ).fetchone()
                    now = time.time()
                    reason = self._takeover_reason(row, now)
                    if reason is None:
                        return False
                    generation = conn.execute(
                        "INSERT INTO lease_generations(name, generation) VALUES (?, 1) ON CONFLICT(name)"
                        " DO UPDATE SET generation=generation+1 RETURNING generation",
                        (self._name,),
                    ).fetchone()[0]
                    conn.execute(
                        "INSERT OR REPLACE INTO locks"
                        " (name, owner, pid, host, acquired, heartbeat, ttl, generation)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (self._name, self._owner, self._pid, HOST, now, now, self._ttl, generation),
                    )
            except apsw.BusyError:
                return False  # another connection is writing; poll again
        self.generation = generation
        if row is not None and reason in ("expired", "dead"):
            log.warning(
                "lock.taken_over",
                name=self._name,
                reason=reason,
                previous_owner=row[0],
                previous_pid=row[1],
                previous_host=row[2],
            )
        return True

    def _takeover_reason(self, row: tuple[Any, ...] | None, now: float) -> str | None:
        if row is None:
            return "free"
        owner, pid, host, beat, ttl = row
        if owner == self._owner and pid == self._pid:
            return "ours"  # left behind by a release that could not reach the database
        if now - beat > ttl:
            return "expired"
        if _holder_dead(owner, pid, host):
            return "dead"
        return None

    def acquire(self, timeout: float | None = None) -> None:
        """Block until the lease is ours (``timeout`` None waits forever); reentrant per thread.

        Raises LockTimeout, carrying the holder's details, once ``timeout`` seconds pass.
        """
        self._after_fork()
        me = threading.get_ident()
        if self._owner_thread == me:
            self._count += 1
            return
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        if not self._gate.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            raise self._timeout(timeout)
        try:
            attempt = 0
            while True:
                remaining = None if deadline is None else deadline - time.monotonic()
                busy_s = 30.0 if remaining is None else min(30.0, max(0.0, remaining))
                if self._try_take(int(busy_s * 1000)):
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise self._timeout(timeout)
                delay = min(_POLL_MAX, _POLL_MIN * 1.5**attempt)
                import random  # lazily: only a contended lease waits, and every command imports this module
                delay = random.uniform(delay / 2, delay)
                time.sleep(delay if remaining is None else min(delay, remaining))
                attempt += 1
            self._start_lease()
        except BaseException:
            self._gate.release()
            raise
        self._owner_thread = me
        self._count = 1

    def _start_lease(self) -> None:
        """Start renewing the freshly taken row; give it back if the thread cannot start."""
        if self._hb_conn is None:
            self._hb_conn = self._connect()
            # A renewal stuck behind a long writer is better retried next tick.
            self._hb_conn.set_busy_timeout(int(self._heartbeat_interval * 1000))
        lease = _Heartbeat(self._hb_conn, self._name, self._owner, self._heartbeat_interval)
        try:
            lease.start()
        except BaseException:
            self._delete_row()
            raise
        self._lease = lease

    def _timeout(self, timeout: float | None) -> LockTimeout:
        holder = self.holder()
        if holder is None:
            who = "another thread sharing this object, or a busy database"
        else:
            who = f"pid {holder['pid']} on {holder['host']} for {holder['held_for']:.1f}s"
        return LockTimeout(
            f"lock {self._name!r} still held by {who} after {timeout}s", holder
        )

    def _delete_row(self) -> bool:
        """Delete the row if it is still ours; False if someone else holds it now."""
        with self._db_lock:
            conn = self._main_conn()
            conn.set_busy_timeout(30_000)
            conn.execute(
                "DELETE FROM locks WHERE name=? AND owner=? AND pid=?",
                (self._name, self._owner, self._pid),
            )
            return conn.changes() > 0

    def release(self) -> None:
        """Undo one acquire; the last one gives the lease back.  A no-op for a non-holder.

        Never raises for database trouble: the lease then simply expires after its ttl.
        """
        self._after_fork()
        if self._owner_thread != threading.get_ident():
            return
        self._count -= 1
        if self._count:
            return
        lease, self._lease = self._lease, None
        self._owner_thread = None
        try:
            if lease is not None:
                lease.stop()
            deleted = self._delete_row()
            if not deleted and lease is not None and not lease.lost:
                log.error(
                    "lock.lost",
                    name=self._name,
                    owner=self._owner,
                    reason="row gone or taken over by release time",
                )
        except apsw.Error as exc:
            log.error("lock.release_failed", name=self._name, error=str(exc))
        finally:
            self._gate.release()

    def hold(self, timeout: float | None = None) -> contextlib.AbstractContextManager[None]:
        """``with lock.hold(timeout):`` acquires for the block and releases after it."""
        return self._hold(timeout)

    @contextlib.contextmanager
    def _hold(self, timeout: float | None) -> Iterator[None]:
        self.acquire(timeout)
        try:
            yield
        finally:
            self.release()

    def __enter__(self) -> LeaseLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def single_instance(db_path: Path | str, name: str, *, timeout: float) -> LeaseLock | None:
    """The lease that makes this process the one ``name`` daemon of its home (worker, hook
    server), or None when a live process already holds it."""
    lock = LeaseLock(db_path, name)
    try:
        # Not 0: a busy database (other processes writing) must not pass for a live holder.
        lock.acquire(timeout=timeout)
    except LockTimeout:
        return None
    return lock


def stop_requested() -> Callable[[], bool]:
    """Whether SIGTERM or SIGINT came, so a daemon loop ends through its ``finally`` (which
    releases its lease) instead of dying in the middle of a step."""
    import signal  # lazily: daemons only, and every command imports this module
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            signal.signal(sig, lambda signum, frame: stop.set())
        except ValueError:  # not the main thread (tests running a daemon in a thread)
            pass
    return stop.is_set


def _reset_all_after_fork() -> None:
    for lock in list(_INSTANCES):
        lock._after_fork()


os.register_at_fork(after_in_child=_reset_all_after_fork)
