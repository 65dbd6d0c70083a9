"""Detect and fix git ignore rules that would keep shared memories out of commits.

Project-shared memories live in ``<root>/.pi/realmem/`` and are shared only by committing
them, so an ignore rule that covers that directory silently loses them.  Ignored-ness is
decided by the exit status of ``git check-ignore -q`` (with ``-v`` git also prints a matching
``!`` rule and exits 0 although the path is not ignored); ``-v`` only names the rule.  A fix
is suggested only after it was verified in a scratch repository holding a copy of the real
ignore rules: the store must become tracked and every other probe path must keep its
ignored-ness.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import attrs

from realmem import frontend
from realmem.storage.fsutil import atomic_write_text, fsync_dir
from realmem.errors import Error

if TYPE_CHECKING:
    import subprocess

STORE = ".pi/realmem"
STORE_PROBE = f"{STORE}/x.md"
COMMENT = "# realmem: share project memories"

# Paths whose ignored-ness a fix must not change.  They cover files directly in .pi, in
# sibling directories of the store, names that merely start with "realmem", and *.md files
# elsewhere (a "*.md" rule must keep ignoring them after the fix).
FIXED_PROBES: tuple[str, ...] = (
    ".pi/settings.json",
    ".pi/.gitignore",
    ".pi/notes.md",
    ".pi/other/file.txt",
    ".pi/other/x.md",
    ".pi/sessions/a.jsonl",
    ".pi/realmemx/y.md",
    ".pi/realmem.md",
    "x.md",
    "docs/x.md",
)
MAX_REAL_PROBES = 64

# Variables that point git at a particular repository (`git rev-parse --local-env-vars`).
# They are dropped so that git works on `root` and on the scratch copy, never on a
# repository inherited from a calling git hook.
_LOCAL_GIT_ENV = frozenset(
    {
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_OBJECT_DIRECTORY",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_GRAFT_FILE",
        "GIT_INDEX_FILE",
        "GIT_NO_REPLACE_OBJECTS",
        "GIT_REPLACE_REF_BASE",
        "GIT_PREFIX",
        "GIT_INTERNAL_SUPER_PREFIX",
        "GIT_SHALLOW_FILE",
        "GIT_COMMON_DIR",
    }
)

class GitIgnoreError(Error, RuntimeError):
    """git failed unexpectedly, or a fix could not be applied or did not take effect."""


@attrs.frozen
class IgnoreRule:
    """The rule git reports as ignoring the store, located so the user can find it."""

    source: str  # file path as git prints it
    line: int
    pattern: str
    kind: str  # "project" (root or above), "nested", "info-exclude" or "global-excludes"

    def ref(self) -> str:
        """``source:line: pattern``, the form used in warnings."""
        return f"{self.source}:{self.line}: {self.pattern}"


@attrs.frozen
class Fix:
    """Lines to append to one ignore file; verified to re-include only the store."""

    file: str  # absolute path of the file to append to
    lines: tuple[str, ...]
    description: str


@attrs.frozen
class IgnoreStatus:
    """Whether the store is ignored, by which rule, and the verified fix if one exists."""

    ignored: bool
    rule: IgnoreRule | None
    fix: Fix | None

    def warning(self, *, hint: bool = True) -> str | None:
        """One short user-facing warning, or None when the store will be committed; ``hint``
        names the command that fixes it (not wanted inside that command)."""
        if not self.ignored:
            return None
        by = f" ({self.rule.ref()})" if self.rule is not None else ""
        head = f"Shared memories in {STORE} are ignored by git{by} and will not be committed."
        if self.fix is None:
            return f"{head} No automatic fix was found; re-include {STORE} by hand."
        if not hint:
            return head
        # A nested rule is fixed in its own file; every other fix goes into root/.gitignore.
        target = ".gitignore"
        if self.rule is not None and self.rule.kind == "nested":
            target = self.rule.source
        lines = ", ".join(self.fix.lines)
        return f"{head} Fix: {frontend.hint('fix-gitignore')} (appends {lines} to {target})."


@attrs.frozen
class _Repo:
    """Facts about the real repository that the scratch copy has to mirror."""

    root: Path  # resolved project root
    toplevel: Path  # resolved work tree top level
    prefix: PurePosixPath  # root relative to toplevel ("." when they are the same)
    info_exclude: Path
    global_excludes: Path | None
    ignore_case: bool
    head: Path  # the work tree's HEAD file (a checkout can bring other ignore rules)
    config: Path  # the repository's own config (core.excludesFile may be set there)


def check(root: Path) -> IgnoreStatus:
    """Report whether git ignores the shared store and, if so, a verified fix.

    A directory outside any git work tree (or a machine without git) has nothing to
    commit, so it is reported as not ignored.  Raises GitIgnoreError if git fails.
    """
    return _check(_open_repo(root))


def _check(repo: _Repo | None) -> IgnoreStatus:
    if repo is None or not _store_ignored(repo.root, ()):
        return IgnoreStatus(False, None, None)
    rule = _name_rule(repo)
    return IgnoreStatus(True, rule, _find_fix(repo, rule))


def apply_fix(root: Path, fix: Fix) -> IgnoreStatus:
    """Append `fix` after re-checking and re-verifying it; return the resulting status.

    Nothing is written when the store is already shared, so applying twice is harmless.
    Raises GitIgnoreError (leaving the file as it was) if the fix targets a file that cannot
    hold it, fails verification against the current rules, or does not take effect.
    """
    repo = _open_repo(root)
    if repo is None:
        return IgnoreStatus(False, None, None)
    current = check(repo.root)
    if not current.ignored:
        return current
    target = Path(fix.file)
    if target.parent.resolve() not in _fix_dirs(repo) or target.name != ".gitignore":
        raise GitIgnoreError(f"{fix.file} is not a .gitignore on the path to {STORE}")
    if target.is_symlink():
        raise GitIgnoreError(f"{fix.file} is a symbolic link, which git does not read")
    if fix != current.fix and not _verifies(repo, target, fix.lines):
        raise GitIgnoreError(f"the fix for {fix.file} no longer makes {STORE} tracked")
    existed = target.exists()
    original = target.read_bytes() if existed else b""
    with target.open("ab") as f:
        f.write(_appended_bytes(original, fix.lines))
        f.flush()
        os.fsync(f.fileno())
    if not existed:
        fsync_dir(target.parent)
    try:
        after = check(repo.root)
    except BaseException:
        _restore(target, existed, len(original))
        raise
    if after.ignored:
        _restore(target, existed, len(original))
        raise GitIgnoreError(f"appending to {fix.file} did not make {STORE} tracked")
    return after


def _open_repo(root: Path) -> _Repo | None:
    """Locate the work tree around `root`; None when there is none or git is missing."""
    root = root.resolve()
    if not root.is_dir():
        return None
    try:
        proc = _git(
            ["rev-parse", "--is-inside-work-tree", "--show-toplevel", "--git-path", "info/exclude",
             "--git-path", "HEAD", "--git-path", "config"],
            cwd=root,
        )
    except FileNotFoundError:
        return None
    out = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
    if proc.returncode != 0 or len(out) != 5 or out[0] != "true":
        return None
    toplevel = Path(out[1]).resolve()
    return _Repo(
        root=root,
        toplevel=toplevel,
        prefix=PurePosixPath(root.relative_to(toplevel).as_posix()),
        info_exclude=(root / out[2]).resolve(),
        global_excludes=_global_excludes(root, toplevel),
        ignore_case=_config(root, ["--type=bool", "core.ignoreCase"]) == "true",
        head=(root / out[3]).resolve(),
        config=(root / out[4]).resolve(),
    )


def _global_excludes(root: Path, toplevel: Path) -> Path | None:
    """The excludes file git reads: core.excludesFile, else the XDG default."""
    configured = _config(root, ["--path", "core.excludesFile"])
    if configured:
        return (toplevel / configured).resolve()
    default = _global_excludes_default()
    return default.resolve() if default is not None else None


def _config(root: Path, args: list[str]) -> str | None:
    proc = _git(["config", *args], cwd=root)
    if proc.returncode == 1:
        return None
    if proc.returncode != 0:
        raise GitIgnoreError(f"git config {' '.join(args)} failed: {_stderr(proc)}")
    return proc.stdout.decode("utf-8", "surrogateescape").strip()


def _store_ignored(cwd: Path, config: Sequence[str]) -> bool:
    """Exit status of `git check-ignore -q`: the only reliable answer (with ``-v`` a matching
    ``!`` rule is printed and git exits 0 although the path is not ignored)."""
    proc = _git([*config, "check-ignore", "-q", "--no-index", STORE_PROBE], cwd=cwd)
    if proc.returncode in (0, 1):
        return proc.returncode == 0
    raise GitIgnoreError(f"git check-ignore failed in {cwd}: {_stderr(proc)}")


def _name_rule(repo: _Repo) -> IgnoreRule | None:
    """The rule git -v names for the store; None if it names none or a `!` rule."""
    proc = _git(
        ["check-ignore", "-v", "-z", "--stdin", "--no-index"],
        cwd=repo.root,
        stdin=f"{STORE_PROBE}\0".encode(),
    )
    if proc.returncode not in (0, 1):
        raise GitIgnoreError(f"git check-ignore -v failed: {_stderr(proc)}")
    fields = proc.stdout.decode("utf-8", "surrogateescape").split("\0")
    if len(fields) < 4 or not fields[0] or not fields[1].isdigit():
        return None
    source, line, pattern = fields[0], int(fields[1]), fields[2]
    if pattern.startswith("!"):
        return None
    return IgnoreRule(source, line, pattern, _kind(repo, source))


def _kind(repo: _Repo, source: str) -> str:
    """Classify a rule's file; per-directory files are printed relative to the top level."""
    path = Path(source)
    resolved = (repo.toplevel / path).resolve()
    if resolved == repo.info_exclude:
        return "info-exclude"
    if not path.is_absolute() and path.name == ".gitignore":
        directory = resolved.parent
        return "project" if directory == repo.root or directory in repo.root.parents else "nested"
    return "global-excludes"


def _fix_dirs(repo: _Repo) -> tuple[Path, ...]:
    """Directories whose .gitignore may receive a fix: the root and those on the store path."""
    return (repo.root, repo.root / ".pi", repo.root / STORE)


def _candidates(repo: _Repo, rule: IgnoreRule | None) -> list[Fix]:
    """Fixes to try in order; verification in the scratch copy picks the first that works."""
    ref = f"Rule {rule.ref()}" if rule is not None else "An ignore rule"
    if rule is not None and rule.kind == "nested":
        target = (repo.toplevel / rule.source).resolve()
        if target.parent not in _fix_dirs(repo):
            return []
        rel = (repo.root / STORE).relative_to(target.parent).as_posix()
        lines = ("!*",) if rel == "." else (f"!/{rel}/", f"!/{rel}/**")
        return [
            Fix(
                str(target),
                lines,
                f"{ref} ignores the shared memories; the lines added to {rule.source} re-include "
                f"{STORE} and everything in it and leave all other paths as they were.",
            )
        ]
    target = repo.root / ".gitignore"
    why = ""
    if rule is not None and rule.kind in ("info-exclude", "global-excludes"):
        why = f" and {rule.source} is not committed, so the lines go into .gitignore"
    return [
        Fix(
            str(target),
            (f"!/{STORE}/", f"!/{STORE}/**"),
            f"{ref} ignores the shared memories{why}; the lines re-include {STORE} and "
            "everything in it and leave all other paths as they were.",
        ),
        Fix(
            str(target),
            ("!/.pi/", "/.pi/*", f"!/{STORE}/", f"!/{STORE}/**"),
            f"{ref} ignores the whole .pi directory{why}; since git cannot re-include a file "
            f"inside an ignored directory, the lines re-include .pi, ignore everything in it "
            f"again and re-include only {STORE}.",
        ),
    ]


def _find_fix(repo: _Repo, rule: IgnoreRule | None) -> Fix | None:
    """The first candidate that verifies in one scratch copy, or None."""
    candidates = [c for c in _candidates(repo, rule) if not Path(c.file).is_symlink()]
    if not candidates:
        return None
    with _scratch(repo) as scratch:
        for fix in candidates:
            if scratch.verifies(Path(fix.file), fix.lines):
                return fix
    return None


def _verifies(repo: _Repo, target: Path, lines: tuple[str, ...]) -> bool:
    with _scratch(repo) as scratch:
        return scratch.verifies(target, lines)


def _probes(repo: _Repo) -> tuple[str, ...]:
    """Fixed probes plus the real entries of .pi, so the user's own files are covered."""
    real: list[str] = []
    pi = repo.root / ".pi"
    if pi.is_dir() and not pi.is_symlink():
        for entry in sorted(pi.iterdir(), key=lambda p: p.name)[:MAX_REAL_PROBES]:
            if entry.name == "realmem":
                continue
            real.append(f".pi/{entry.name}/x.md" if entry.is_dir() else f".pi/{entry.name}")
    return tuple(dict.fromkeys([*FIXED_PROBES, *real]))


class _Scratch:
    """A temp git repository holding copies of every ignore file that affects the probes."""

    def __init__(self, repo: _Repo, base: Path, probes: tuple[str, ...]) -> None:
        self._repo = repo
        self._probes = probes
        self._tree = base / "repo"
        self._cwd = self._tree / repo.prefix
        self._config: tuple[str, ...] = ()
        self._originals: dict[Path, bytes | None] = {}
        self._baseline: frozenset[str] = frozenset()
        self._faithful = False
        self._build(base)

    def _build(self, base: Path) -> None:
        self._tree.mkdir()
        proc = _git(["init", "-q", str(self._tree)], cwd=base)
        if proc.returncode != 0:
            raise GitIgnoreError(f"git init of the scratch copy failed: {_stderr(proc)}")
        excludes = base / "global-excludes"
        src = self._repo.global_excludes
        _copy_or_empty(src if src is not None and src.is_file() else None, excludes)
        self._config = (
            "-c",
            f"core.excludesFile={excludes}",
            "-c",
            f"core.ignoreCase={'true' if self._repo.ignore_case else 'false'}",
        )
        info = _git(["rev-parse", "--git-path", "info/exclude"], cwd=self._tree)
        scratch_info = self._tree / info.stdout.decode("utf-8", "surrogateescape").strip()
        scratch_info.parent.mkdir(parents=True, exist_ok=True)
        real_info = self._repo.info_exclude
        _copy_or_empty(real_info if real_info.is_file() else None, scratch_info)
        for directory in self._ignore_dirs():
            real = self._repo.toplevel / directory / ".gitignore"
            # git does not follow a symlinked .gitignore in the work tree, so neither do we.
            if real.is_file() and not real.is_symlink():
                copy = self._tree / directory / ".gitignore"
                copy.parent.mkdir(parents=True, exist_ok=True)
                _copy(real, copy)
        self._cwd.mkdir(parents=True, exist_ok=True)
        self._faithful = _store_ignored(self._cwd, self._config)
        self._baseline = self._ignored(self._probes)

    def _ignore_dirs(self) -> set[PurePosixPath]:
        """Top-level-relative directories on the way to the store and to every probe."""
        dirs = {PurePosixPath("."), *self._repo.prefix.parents, self._repo.prefix}
        for path in (STORE_PROBE, *self._probes):
            for parent in PurePosixPath(path).parents:
                dirs.add(self._repo.prefix / parent)
        return dirs

    def _ignored(self, paths: Iterable[str]) -> frozenset[str]:
        payload = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)
        proc = _git(
            [*self._config, "check-ignore", "--no-index", "-z", "--stdin"],
            cwd=self._cwd,
            stdin=payload,
        )
        if proc.returncode not in (0, 1):
            raise GitIgnoreError(f"git check-ignore failed in the scratch copy: {_stderr(proc)}")
        return frozenset(p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p)

    def verifies(self, target: Path, lines: tuple[str, ...]) -> bool:
        """True if appending `lines` to `target` shares the store and changes no probe."""
        if not self._faithful:
            return False
        copy = self._tree / target.parent.resolve().relative_to(self._repo.toplevel) / target.name
        if copy not in self._originals:
            self._originals[copy] = copy.read_bytes() if copy.exists() else None
        original = self._originals[copy] or b""
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(original + _appended_bytes(original, lines))
        try:
            return (
                not _store_ignored(self._cwd, self._config)
                and self._ignored(self._probes) == self._baseline
            )
        finally:
            saved = self._originals[copy]
            if saved is None:
                copy.unlink()
            else:
                copy.write_bytes(saved)


@contextmanager
def _scratch(repo: _Repo) -> Iterator[_Scratch]:
    import tempfile  # lazily, as shutil and subprocess below: status answers from the cache, spawning nothing
    with tempfile.TemporaryDirectory(prefix="realmem-gitignore-") as tmp:
        yield _Scratch(repo, Path(tmp).resolve(), _probes(repo))


def _appended_bytes(existing: bytes, lines: tuple[str, ...]) -> bytes:
    """What apply_fix appends: a newline if missing, the comment, then the lines."""
    newline = b"\r\n" if b"\r\n" in existing else b"\n"
    lead = newline if existing and not existing.endswith(b"\n") else b""
    body = newline.join(line.encode("utf-8") for line in (COMMENT, *lines))
    return lead + body + newline


def _restore(target: Path, existed: bool, size: int) -> None:
    """Undo an append that did not take effect."""
    if existed:
        os.truncate(target, size)
    else:
        target.unlink(missing_ok=True)


def _copy_or_empty(src: Path | None, dst: Path) -> None:
    if src is None:
        dst.write_bytes(b"")
    else:
        _copy(src, dst)


def _copy(src: Path, dst: Path) -> None:
    import shutil
    shutil.copyfile(src, dst)


def _git(
    args: list[str], *, cwd: Path, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    import subprocess
    env = {k: v for k, v in os.environ.items() if k not in _LOCAL_GIT_ENV}
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=env,
        input=stdin if stdin is not None else b"",
        capture_output=True,
        check=False,
    )


def _stderr(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stderr.decode("utf-8", "replace").strip() or f"exit status {proc.returncode}"


def store_warning(root: Path, cache: Path | None = None) -> str | None:
    """The user-facing warning for the shared store at ``root`` (None when it is shared);
    a git failure becomes a warning too, because session start and status must not fail."""
    try:
        return cached_check(root, cache).warning()
    except GitIgnoreError as exc:
        return f"could not check whether .pi/realmem is ignored by git: {exc}"


# --- a cheap re-check -----------------------------------------------------------------------------
#
# ``check`` runs git several times (and builds a scratch repository when the store is ignored),
# too slow for every shared remember.  Its answer can only change when a file git reads for it
# changes, so it is cached per root under the stat of each of them: every .gitignore on the way
# to the store, info/exclude, the global excludes file, the git config files that name it, and
# HEAD.  A fix appended by `fix-gitignore`, or a rule added by hand, changes one of them, so the
# next remember sees it at once.  Given a cache directory (a realmem home), the answer is also
# kept in a file there, so a fresh process (`realmem status`) spawns no git while nothing changed.

_Stat = tuple[int, int, int, int] | None
_CACHE: dict[Path, tuple[_Repo | None, tuple[object, ...], IgnoreStatus]] = {}


CACHE_FILE = "gitignore-cache.json"
MAX_CACHED_ROOTS = 64


def cached_check(root: Path, cache: Path | None = None) -> IgnoreStatus:
    """``check``, answered from the cache (and from ``cache``/CACHE_FILE when given) while
    none of the ignore sources changed."""
    root = root.resolve()
    hit = _CACHE.get(root) or (_load(cache, root) if cache is not None else None)
    if hit is not None and hit[0] is not None and _signature(hit[0]) == hit[1]:
        _CACHE[root] = hit
        return hit[2]
    repo = _open_repo(root)
    if repo is None:
        return IgnoreStatus(False, None, None)  # no git here: nothing to cache against
    signature = _signature(repo)  # taken before the check: a change during it is seen next time
    status = _check(repo)
    _CACHE[root] = (repo, signature, status)
    if cache is not None:
        _save(cache, root, repo, signature, status)
    return status


def _read_cache(cache: Path) -> dict[str, object]:
    try:
        data = json.loads((cache / CACHE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _load(cache: Path, root: Path) -> tuple[_Repo, tuple[object, ...], IgnoreStatus] | None:
    """The entry ``_save`` wrote for ``root``; None when there is none or it does not parse."""
    entry = _read_cache(cache).get(str(root))
    try:
        r, st = entry["repo"], entry["status"]  # type: ignore[index]
        opt = lambda v: Path(v) if v is not None else None  # noqa: E731
        repo = _Repo(root=Path(r["root"]), toplevel=Path(r["toplevel"]), prefix=PurePosixPath(r["prefix"]),
                     info_exclude=Path(r["info_exclude"]), global_excludes=opt(r["global_excludes"]),
                     ignore_case=bool(r["ignore_case"]), head=Path(r["head"]), config=Path(r["config"]))
        rule = IgnoreRule(**st["rule"]) if st["rule"] else None
        fix = Fix(st["fix"]["file"], tuple(st["fix"]["lines"]), st["fix"]["description"]) if st["fix"] else None
        return repo, _from_json(entry["signature"]), IgnoreStatus(bool(st["ignored"]), rule, fix)  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return None


def _from_json(value: object) -> object:
    """JSON lists back to the tuples ``_signature`` builds, so the two compare equal."""
    return tuple(_from_json(v) for v in value) if isinstance(value, list) else value


def _save(cache: Path, root: Path, repo: _Repo, signature: tuple[object, ...], status: IgnoreStatus) -> None:
    data = _read_cache(cache)
    data.pop(str(root), None)
    data[str(root)] = {"repo": {k: (str(v) if v is not None and not isinstance(v, bool) else v)
                                for k, v in attrs.asdict(repo, recurse=False).items()},
                       "signature": signature, "status": attrs.asdict(status)}
    try:
        atomic_write_text(cache / CACHE_FILE, json.dumps(dict(list(data.items())[-MAX_CACHED_ROOTS:])), durable=False)
    except OSError:
        pass  # only a cache: the next process asks git again


def _stat(path: Path | None) -> _Stat:
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def _config_files() -> list[Path | None]:
    """git's system and global config files, as git itself finds them."""
    env = os.environ
    home = Path(env["HOME"]) if env.get("HOME") else None
    xdg = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else (home / ".config" if home else None)
    files: list[Path | None] = []
    if env.get("GIT_CONFIG_GLOBAL"):
        files.append(Path(env["GIT_CONFIG_GLOBAL"]))
    else:
        files += [home / ".gitconfig" if home else None, xdg / "git" / "config" if xdg else None]
    if not env.get("GIT_CONFIG_NOSYSTEM"):
        files.append(Path(env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"))
    return files


def _signature(repo: _Repo) -> tuple[object, ...]:
    dirs = [repo.toplevel / d for d in sorted(_ignore_chain(repo))]
    sources: list[Path | None] = [d / ".gitignore" for d in dirs]
    sources += [repo.info_exclude, repo.global_excludes, repo.head, repo.config, *_config_files()]
    default = _global_excludes_default()
    if default is not None and default.resolve() != repo.global_excludes:
        sources.append(default)  # read again if core.excludesFile is unset
    env = tuple(os.environ.get(v) for v in ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM",
                                             "GIT_CONFIG_SYSTEM"))
    return (env, tuple((str(p), _stat(p)) for p in sources))


def _ignore_chain(repo: _Repo) -> set[PurePosixPath]:
    """Top-level-relative directories whose .gitignore can decide about the store."""
    store = repo.prefix / STORE
    return {*store.parents, store}


def _global_excludes_default() -> Path | None:
    """Where git looks for global excludes when core.excludesFile is not set."""
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        return Path(xdg) / "git" / "ignore"
    home = os.environ.get("HOME")
    return Path(home) / ".config" / "git" / "ignore" if home else None
