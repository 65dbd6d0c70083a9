"""The one SQLite layer: open a connection (WAL, busy_timeout, sqlite-vec) and migrate.

The stdlib ``sqlite3`` of Python 3.11 on our machines cannot load extensions
(``enable_load_extension`` is missing), so sqlite-vec cannot load through it; apsw can.  Every other module receives an ``apsw.Connection`` from here.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib.util
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import apsw

from realmem.errors import StorageError
from realmem.logs import get_logger
from realmem.storage import fsutil

logger = get_logger(__name__)

# Inside the package, so an installed wheel (pipx, uvx) carries them as a checkout does.  A
# path beside this file, not importlib.resources: that imports tempfile, which every command's
# start would pay (realmem runs from files on disk, never from a zip).
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
BUSY_TIMEOUT_MS = 30_000
WAL_SIZE_LIMIT = 4 << 20  # what wal_autocheckpoint's 1,000 pages fill


@functools.cache
def _vec0_path() -> str:
    """``sqlite_vec.loadable_path()`` without importing sqlite_vec, which imports the stdlib
    sqlite3 we never use (start-up time)."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("sqlite-vec is not installed")
    return os.path.normpath(os.path.join(spec.submodule_search_locations[0], "vec0"))


# SQLite's errors that mean the file or its disk, not the statement: a read-only or full
# REALMEM_HOME, a file another program damaged.  They name no file, so they are reported
# with the database's path (``storage_error``).
DISK_ERRORS = (apsw.CantOpenError, apsw.IOError, apsw.FullError, apsw.ReadOnlyError, apsw.PermissionsError)
DAMAGED_ERRORS = (apsw.CorruptError, apsw.NotADBError)
DISK_ERRNOS = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EFBIG, errno.EIO})


def storage_error(exc: BaseException, path: Path | str, conn: apsw.Connection | None = None) -> StorageError | None:
    """The one line for a disk or file failure on the database ``path`` (or on a file named
    by an OSError), or None when ``exc`` is not one (a bug stays a traceback)."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
        return StorageError(f"{exc.filename or path}: cannot be written ({exc.strerror}); nothing was changed")
    if isinstance(exc, DAMAGED_ERRORS):
        return StorageError(f"{path} is damaged ({exc}); `realmem repair` moves it aside and rebuilds it "
                            "from the fact files")
    if not isinstance(exc, DISK_ERRORS):
        return None
    return StorageError(f"{path}: cannot be written ({_cause(exc, Path(path), conn)}; SQLite: {exc}); "
                        "nothing was changed")


def _cause(exc: BaseException, path: Path, conn: apsw.Connection | None) -> str:
    """Why SQLite could not use ``path``: the OS error it got, else what the disk shows."""
    if isinstance(exc, apsw.FullError):
        return os.strerror(errno.ENOSPC)
    code = 0
    if conn is not None:
        try:
            code = conn.system_errno
        except apsw.Error:
            pass
    if code:
        return os.strerror(code)
    d = path.parent
    try:
        fs = os.statvfs(d)
    except OSError as err:
        return err.strerror or str(err)
    if fs.f_flag & os.ST_RDONLY:
        return os.strerror(errno.EROFS)
    if fs.f_bavail == 0:
        return os.strerror(errno.ENOSPC)
    if not os.access(d, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return os.strerror(errno.EACCES)
    return "the disk refused the write"


def connect(path: Path | str, *, migrate: bool = True) -> apsw.Connection:
    """Open ``path`` with the pragmas every realmem process relies on; a file that cannot be
    opened, written or read raises a StorageError naming it."""
    conn: apsw.Connection | None = None
    try:
        conn = _connect(path, migrate)
    except (apsw.Error, OSError) as exc:
        err = storage_error(exc, path, conn)
        if conn is not None:
            conn.close()
        if err is None:
            raise
        raise err from exc
    return conn


def _connect(path: Path | str, migrate: bool) -> apsw.Connection:
    fsutil.private_file(Path(path))
    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    conn.enable_load_extension(True)
    conn.load_extension(_vec0_path())
    conn.enable_load_extension(False)
    _ensure_wal(conn)
    conn.execute("PRAGMA synchronous=NORMAL")
    # A WAL grown by a long run of batches (``one_checkpoint``) is cut back when it restarts.
    conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
    conn.execute("PRAGMA foreign_keys=ON")
    try:
        if migrate:
            apply_migrations(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _ensure_wal(conn: apsw.Connection) -> None:
    """WAL is persistent, so only a new database needs the switch.  The switch can fail with
    SQLITE_BUSY at once, without consulting the busy handler, while other connections are
    open; retry it within the busy timeout instead of failing the open."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except apsw.BusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


@contextlib.contextmanager
def transaction(conn: apsw.Connection, *, immediate: bool = True) -> Iterator[apsw.Connection]:
    """A write transaction.  IMMEDIATE takes the write lock up front so busy_timeout applies
    at BEGIN instead of failing later with SQLITE_BUSY on lock upgrade."""
    if conn.in_transaction:  # nested use joins the outer transaction
        yield conn
        return
    try:
        conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled back already (a full disk)
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except DISK_ERRORS + DAMAGED_ERRORS as exc:
        if conn.in_transaction:  # a failed COMMIT leaves it open
            conn.execute("ROLLBACK")
        raise storage_error(exc, conn.filename, conn) from exc


@contextlib.contextmanager
def one_checkpoint(conn: apsw.Connection, behind: Checkpoints | None = None) -> Iterator[None]:
    """Large transactions in a row (a scan's batches) without a checkpoint after each, then
    one at the end.  A batch of new memories in a large store rewrites many pages of indexes
    keyed by random ids, so every commit passed ``wal_autocheckpoint`` and copied them all
    into the database and synced it; the pages the batches share are copied once.  Other
    connections checkpoint as before.
    ``behind``: that checkpoint is made on its thread, else here."""
    (was,) = conn.execute("PRAGMA wal_autocheckpoint").fetchone()
    conn.execute("PRAGMA wal_autocheckpoint=0")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA wal_autocheckpoint={int(was)}")
    if not conn.in_transaction:  # inside one a checkpoint cannot run: the outer commit's autocheckpoint does
        if behind is not None:
            behind.start()
        else:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")  # readers still on older pages: the next one finishes


class Checkpoints:
    """Checkpoints of ``conn``'s database made on a thread, with a connection of its own,
    while the caller goes on (a scan's other stores, replay's file pass).  Most of the
    checkpoint after a large write is the fsync of the WAL and the database, which needs no
    core.  Until it is done ``conn`` makes no checkpoint of its own (its next commit would
    take the work back).
    Exiting the context waits for the last one.  A checkpoint that fails is logged: the WAL
    still holds every commit, and the next checkpoint copies them."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self._thread: threading.Thread | None = None
        self._autocheckpoint: int | None = None  # conn's own setting, put back by ``wait``

    def __enter__(self) -> Checkpoints:
        return self

    def __exit__(self, *exc: object) -> None:
        self.wait()

    def start(self) -> None:
        self.wait()
        (self._autocheckpoint,) = self.conn.execute("PRAGMA wal_autocheckpoint").fetchone()
        self.conn.execute("PRAGMA wal_autocheckpoint=0")
        self._thread = threading.Thread(target=self._run, args=(self.conn.filename,), name="realmem-checkpoint",
                                        daemon=True)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._autocheckpoint is not None:
            self.conn.execute(f"PRAGMA wal_autocheckpoint={int(self._autocheckpoint)}")
            self._autocheckpoint = None

    @staticmethod
    def _run(path: str) -> None:
        try:
            conn = apsw.Connection(path)
            try:
                conn.set_busy_timeout(BUSY_TIMEOUT_MS)
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            finally:
                conn.close()
        except Exception as exc:  # noqa: BLE001 (logged; the WAL keeps the data)
            logger.warning("checkpoint.failed", path=path, error=str(exc))


def _migration_files() -> list[tuple[int, Path]]:
    out = []
    for f in MIGRATIONS.iterdir():
        m = re.match(r"(\d+)_.*\.sql$", f.name)
        if m:
            out.append((int(m.group(1)), f))
    return sorted(out)


def apply_migrations(conn: apsw.Connection) -> int:
    """Apply numbered ``migrations/NNN_name.sql`` files not yet recorded; return the version."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    done = {row[0] for row in conn.execute("SELECT version FROM schema_version")}
    pending = [(v, f) for v, f in _migration_files() if v not in done]
    for version, f in pending:
        with transaction(conn):
            # Another process may have applied it while we waited for the write lock.
            if conn.execute("SELECT 1 FROM schema_version WHERE version=?", (version,)).fetchone():
                continue
            conn.execute(f.read_text(encoding="utf-8"))
            conn.execute(
                "INSERT INTO schema_version VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now'))",
                (version, f.name),
            )
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return row[0] or 0
