"""Atomic file writes: temp file in the same directory, fsync, rename, fsync the directory.

A reader sees the old bytes or the new bytes, never a torn file, even if the writer is
killed at any instruction.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Collection
from pathlib import Path


def atomic_write_text(path: Path, text: str, *, mode: int | None = None, durable: bool = True) -> None:
    import tempfile  # lazily: it loads shutil, random and hashlib, start-up time of commands that write no file
    make_dirs(path.parent)
    if mode is None:
        mode = file_mode(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if durable:
        fsync_dir(path.parent)


def _read_umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


# Read once at import: os.umask is process-wide, so toggling it per write would race with
# other threads creating files.
_UMASK = _read_umask()
FILE_MODE = 0o666 & ~_UMASK & ~0o022


def file_mode(directory: Path) -> int:
    """The mode of a new file in ``directory``.  A fact file in a project is an ordinary file
    (0666 less the umask) but never group- or world-writable whatever the umask: anyone who
    can write it can plant a fact.  In a private directory (REALMEM_HOME and all below it) it
    is 0600: a 0644 file there is only one chmod of the directory away from being read."""
    try:
        private = not directory.stat().st_mode & 0o077
    except OSError:
        private = False
    return FILE_MODE & 0o600 if private else FILE_MODE


def make_dirs(directory: Path) -> None:
    """``mkdir -p`` where each new directory is no more open than the one it is made in, so
    a store under a 0700 REALMEM_HOME stays private under umask 022, while one in a project
    gets the project's usual mode."""
    if directory.is_dir():
        return
    make_dirs(directory.parent)
    try:
        os.mkdir(directory, directory.parent.stat().st_mode & 0o777)
    except FileExistsError:
        pass


def _tighten(path: Path, mode: int) -> None:
    """Drop group/other bits from a path we own (an older version made it 0755 / 0644)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid():
        return
    if st.st_mode & 0o777 & ~mode:
        os.chmod(path, st.st_mode & mode & 0o777)


def private_dir(directory: Path) -> None:
    """Create ``directory`` (REALMEM_HOME) as 0700, or tighten it: it holds personal memories,
    judge traces and keys, which other local users must not read."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        # REALMEM_HOME=/tmp (sticky) or ~ itself must never be chmod-ed under everyone else.
        try:
            shared = directory.stat().st_mode & stat.S_ISVTX or directory.resolve() in (Path.home().resolve(),
                                                                                        Path("/"))
        except OSError:
            return
        if not shared:
            _tighten(directory, 0o700)


def private_file(path: Path) -> None:
    """Make sure ``path`` (a SQLite database) exists as 0600 before SQLite creates it with the
    umask's mode; SQLite gives its -wal and -shm files the database's mode.  Older, looser
    files are tightened."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
    except FileExistsError:
        pass
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"),
              path.with_name(path.name + "-journal")):
        _tighten(p, 0o600)


def fsync_dir(directory: Path | str) -> None:
    _fsync_path(directory)


def _fsync_path(path: Path | str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # gone since (a later write replaced it and is flushed too), or unreadable
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


FLUSH_ONE_BY_ONE = 2000  # more files than this written at once: one os.sync costs less than their fsyncs
FLUSH_THREADS = 8


def flush_written(paths: Collection[str]) -> None:
    """Make files written with ``durable=False`` durable, with their directory entries: an
    fsync of each file, then of each directory, several at a time (the filesystem's journal
    commits concurrent fsyncs together).
    Not os.sync, which also waits for every other file any process left unwritten on any
    filesystem: a build or a large checkout beside the agent made a scan wait for it.
    Beyond ``FLUSH_ONE_BY_ONE`` files (a first replay) one os.sync is cheaper after all."""
    if not paths:
        return
    if len(paths) > FLUSH_ONE_BY_ONE:
        os.sync()
        return
    from concurrent.futures import ThreadPoolExecutor  # lazily: start-up

    with ThreadPoolExecutor(max_workers=min(FLUSH_THREADS, len(paths))) as pool:
        list(pool.map(_fsync_path, paths))  # the files' data before the renames that name them
        list(pool.map(_fsync_path, {os.path.dirname(p) for p in paths}))


class NotRegularFile(OSError):
    """A path that is a FIFO, socket, device or directory where a regular file was expected."""


def file_kind(mode: int) -> str:
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return what
    return "a special file"


def read_regular(path: Path | str, *, limit: int | None = None, follow: bool = True, checked: bool = False) -> bytes:
    """The bytes of a regular file, at most ``limit + 1`` of them (so callers can tell "too
    large").  The type is checked before the open (a FIFO would block it, a device could
    return anything; ``checked``: the caller has just stat'ed it) and again on the
    descriptor, which is opened non-blocking, so a path swapped for a FIFO in between cannot
    hang the reader either.  ``follow=False`` refuses a symlink.  Raises OSError
    (NotRegularFile for the wrong type)."""
    if not checked:
        st = os.stat(path, follow_symlinks=follow)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(f"{path} is {file_kind(st.st_mode)}, not a regular file")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(f"{path} is {file_kind(st.st_mode)}, not a regular file")
        # os.read, not a file object: a fact file is read in one call (and one more for its end)
        want = None if limit is None else limit + 1
        chunks, got, size = [], 0, max(st.st_size + 1, 4096)
        while want is None or got < want:
            chunk = os.read(fd, size if want is None else min(size, want - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def remove_file(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        return
    fsync_dir(path.parent)


def read_cache(path: Path) -> dict:
    """A JSON object kept as a cache; {} when the file is missing, unreadable or not one."""
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def keep_in_cache(path: Path, known: dict, key: str, value: object, limit: int) -> None:
    """Write ``known`` with ``key`` set to ``value`` as the newest entry, keeping the ``limit``
    newest.  Only a cache: a failed write is left for the next caller to redo."""
    known.pop(key, None)
    known[key] = value
    try:
        atomic_write_text(path, json.dumps(dict(list(known.items())[-limit:])), durable=False)
    except OSError:
        pass
