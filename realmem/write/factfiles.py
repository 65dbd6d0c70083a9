"""Reading a store's fact files: one file, safely; and a large pull's new files, two at a time.

``read`` checks a store entry before it opens it (a symlink leaving the store, a FIFO, a
device, a file too large, binary or not UTF-8 is a ``BadFile``, never a hang or a crash).

A `git pull` may bring thousands of new fact files.  Reading, parsing and safety-scanning them
takes one core's time, and the scan does them one after the other.  With many new
files, a ``Helper`` process (this module run with ``python -m``) works through them from the
last one back while the scan works from the first one on; when the scan reaches a file the
helper has done, the rest are done, and the helper is stopped.  The two meet wherever the
machine's load puts them.  The scan still decides everything: it uses a text only for a file
whose (inode, mtime, size) is what the helper read, and parsing and the safety scan are the
same code.  A helper that cannot start, fails or falls behind costs nothing but its own time.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

import attrs

from realmem.projections import files
from realmem.storage.fsutil import NotRegularFile, file_kind, read_regular

if TYPE_CHECKING:
    import subprocess

# Fewer new files than this are read by the scan alone: the helper's start (an
# interpreter and its imports) would not pay for itself.
HELPER_MIN_FILES = 1000
_FRAME = 4  # bytes of each result's length


class BadFile(Exception):
    """A directory entry that is not a readable fact file; ``kind`` is the FileProblem kind."""

    def __init__(self, kind: str, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.kind, self.line = kind, line

    def describe(self, name: str) -> str:
        return f"{name}{'' if self.line is None else f' line {self.line}'} {self}"


Texts = dict[tuple[str, int, int, int], str]  # (name, inode, mtime_ns, size) -> text


def read(d: str | Path, name: str, root: Path, known: tuple[int, int] | None,
         texts: Texts) -> tuple[os.stat_result, str | None]:
    """(stat, text) of the store entry ``name`` in ``d``; text None when its (mtime, size) is
    ``known`` (unchanged).  Its type is checked before anything is opened
    (``fsutil.read_regular``).  ``texts``: what this scan already read; a text read here is
    added to it."""
    path = os.path.join(d, name)
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise BadFile("unreadable", f"cannot read: {exc.strerror}") from None
    link = stat.S_ISLNK(st.st_mode)
    if link:
        try:
            st = os.stat(path)
        except OSError as exc:
            what = "is a symlink loop" if exc.errno == errno.ELOOP else f"is a broken symlink ({exc.strerror})"
            raise BadFile("unreadable", f"{what}; ignored") from None
        target = Path(os.path.realpath(path))
        if not target.is_relative_to(root):
            raise BadFile("symlink-escape", f"links outside the store ({target}); ignored")
    if not stat.S_ISREG(st.st_mode):
        raise BadFile("not-a-file", f"is {file_kind(st.st_mode)}, not a regular file; ignored")
    if known == (st.st_mtime_ns, st.st_size):
        return st, None
    seen = texts.get((name, st.st_ino, st.st_mtime_ns, st.st_size))
    if seen is not None:
        return st, seen
    if st.st_size > files.MAX_FILE_BYTES:
        raise BadFile("unreadable", f"is larger than {files.MAX_FILE_BYTES} bytes ({st.st_size}); ignored")
    try:
        data = read_regular(path, limit=files.MAX_FILE_BYTES, follow=link, checked=True)  # stat'ed above
    except NotRegularFile as exc:
        raise BadFile("not-a-file", f"{str(exc).removeprefix(path).strip()}; ignored") from None
    except OSError as exc:
        raise BadFile("unreadable", f"cannot read: {exc.strerror}") from None
    if len(data) > files.MAX_FILE_BYTES:
        raise BadFile("unreadable", f"is larger than {files.MAX_FILE_BYTES} bytes; ignored")
    if b"\0" in data:
        line = data[:data.index(b"\0")].count(b"\n") + 1
        raise BadFile("unreadable", "is a binary file (it holds NUL bytes), not a fact; ignored", line)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise BadFile("unreadable", f"is not UTF-8 text (byte 0x{data[exc.start]:02x}); ignored", line) from None
    texts[(name, st.st_ino, st.st_mtime_ns, st.st_size)] = text
    return st, text


def quarantine_reason(caption: str, content: str, paths: Sequence[str] = ()) -> str | None:
    """Why the safety scan quarantines this fact (its text, then its paths, as a candidate's), or None."""
    # lazily: the scanner's rules are costly to load, and most scans read no file
    from realmem.gate.safety import scan_memory, scan_paths

    result, _, _ = scan_memory(caption, content)
    if not result.ok:
        return result.reason()
    in_paths = scan_paths(paths)
    return None if in_paths.ok else "refused: a path " + in_paths.reason().removeprefix("refused: ")


def masked(caption: str, content: str, paths: list[str], text: str) -> tuple[str, str, list[str], str]:
    """A quarantined fact with every secret masked as a refused candidate's is (caption and
    content together, then the paths), and its file text with each of them masked wherever it
    occurs: what the log, the tables and the file then hold (nothing stores the secret)."""
    # lazily, as in quarantine_reason; only a quarantined fact gets here
    from realmem.gate.safety import mask_found, mask_memory, scan_memory, scan_paths

    result, _, _ = scan_memory(caption, content)
    in_paths = scan_paths(paths)
    m_caption, m_content = mask_memory(caption, content, result)
    return m_caption, m_content, [mask_found(p, in_paths) for p in paths], mask_found(text, result, in_paths)


# What the helper found for one file: its (inode, mtime, size) and text, and, when the text
# parses, the parsed fact and the safety scan's verdict.  None: the scan reads it itself (and
# reports what is wrong with it).
Found = tuple[int, int, int, str, files.Parsed | None, str | None] | None


def _find(d: Path, root: Path, name: str) -> Found:
    try:
        st, text = read(d, name, root, None, {})
    except BadFile:
        return None
    assert text is not None
    try:
        parsed = files.parse(text)
    except files.FactFileError:
        return st.st_ino, st.st_mtime_ns, st.st_size, text, None, None
    quarantine = quarantine_reason(parsed.caption, parsed.content, parsed.paths)
    return st.st_ino, st.st_mtime_ns, st.st_size, text, parsed, quarantine


class Helper:
    """A helper process reading ``names`` (sorted) of ``d`` from the last one back; ``take``
    gives what it has found for a name once the scan reaches it.

    The request and the answers go through unnamed temporary files, not pipes: the helper
    never waits for the scan to read what it found (a pipe held 60 of its answers, and the scan
    reads them only once it reaches the new files), and nothing needs a thread."""

    def __init__(self, d: Path, names: Sequence[str]) -> None:
        self.names = names
        self.low = len(names)  # the helper has found names[low:]
        self.found: dict[str, Found] = {}
        self._buf = bytearray()
        self._read = 0  # how much of the answers has been read
        self._proc: subprocess.Popen[bytes] | None = None
        self._answers: IO[bytes] | None = None
        if len(names) < HELPER_MIN_FILES:
            return
        import marshal  # lazily, as these: start-up of commands that scan no pull
        import subprocess
        import tempfile

        try:
            with tempfile.TemporaryFile() as request:
                marshal.dump((str(d), list(names)), request)
                request.seek(0)
                self._answers = tempfile.TemporaryFile()
                self._proc = subprocess.Popen(self.command(), stdin=request, stdout=self._answers,
                                              stderr=subprocess.DEVNULL, env=_env())
        except OSError:
            self.close()

    @staticmethod
    def command() -> list[str]:
        return [sys.executable, "-m", __name__]

    def take(self, index: int) -> Found:
        """What the helper found for ``names[index]`` (None: nothing, the scan reads it).  Once
        the scan reaches the helper's part, the helper has nothing left to do and is stopped."""
        if self._proc is not None:
            self._drain()
            if index >= self.low:
                self.close()
        return self.found.get(self.names[index]) if self.found else None

    def _drain(self) -> None:
        import marshal

        assert self._answers is not None
        fd = self._answers.fileno()
        try:
            size = os.fstat(fd).st_size
            chunk = os.pread(fd, size - self._read, self._read) if size > self._read else b""
        except OSError:
            return
        self._read += len(chunk)
        self._buf += chunk
        while len(self._buf) >= _FRAME and self.low > 0:
            size = int.from_bytes(self._buf[:_FRAME], "little")
            if len(self._buf) < _FRAME + size:
                break  # written in part so far
            found = marshal.loads(self._buf[_FRAME:_FRAME + size])
            del self._buf[:_FRAME + size]
            self.low -= 1
            if found is not None and found[4] is not None:
                found = (*found[:4], files.Parsed(*found[4]), found[5])
            self.found[self.names[self.low]] = found

    def close(self) -> None:
        """Stop the helper (if it still runs) and wait for it."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        answers, self._answers = self._answers, None
        if answers is not None:
            answers.close()

    def __enter__(self) -> "Helper":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _env() -> dict[str, str]:
    """The helper imports the same realmem as the scan, wherever that was found."""
    here = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": here if not path else os.pathsep.join([here, path])}


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """The helper: one request (directory, names), one frame per name, the last name first."""
    import marshal

    d, names = marshal.load(stdin)
    root = Path(os.path.realpath(d))
    for name in reversed(names):
        found = _find(Path(d), root, name)
        if found is not None and found[4] is not None:  # as plain values: marshal, faster than pickle
            found = (*found[:4], attrs.astuple(found[4], recurse=False), found[5])
        frame = marshal.dumps(found)
        stdout.write(len(frame).to_bytes(_FRAME, "little") + frame)
        stdout.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
