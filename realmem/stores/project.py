"""Which project a directory belongs to, and its stores (spec: "Scopes and storage").

The project key is ``git-<root commit>`` so it survives clones, worktrees and moves; outside
git, or before the first commit, it is ``path-<hash of root>``.

Every command starts here, so the common case spawns no git: the work tree is found by
walking up to ``.git`` and HEAD is read from its files; the root commit is a function of the
HEAD commit alone (without grafts, replace refs or a shallow clone), so it is asked of git
once per new HEAD and kept in ``<home>/git-roots.json``.  Anything unusual (GIT_DIR and
friends, core.worktree, a bare repository, another owner, a filesystem boundary) asks git.
"""

from __future__ import annotations

import enum
import hashlib
import os
import re
from functools import lru_cache
from pathlib import Path

import attrs

from realmem.storage.fsutil import atomic_write_text, keep_in_cache, read_cache


class Scope(enum.StrEnum):
    """The three scopes a user or model names; a store's kind is one of them (str-valued, so
    JSON, events and CLI arguments spell them as before)."""

    GLOBAL = "global"
    SHARED = "shared"
    PERSONAL = "personal"


SCOPES = tuple(s.value for s in Scope)  # ("global", "shared", "personal"), the order users see
GLOBAL = Scope.GLOBAL.value


@attrs.frozen
class Project:
    root: Path
    key: str
    is_git: bool

    @property
    def path_key(self) -> str:
        return path_key(self.root)

    @property
    def shared_store(self) -> str:
        return f"shared:{self.root}"

    @property
    def personal_store(self) -> str:
        return f"personal:{self.key}"

    @property
    def shared_dir(self) -> Path:
        return self.root / ".pi" / "realmem"


def path_key(root: Path) -> str:
    return "path-" + hashlib.sha256(str(root).encode("utf-8")).hexdigest()[:16]


def _git(cwd: Path, *args: str) -> str | None:
    import subprocess  # lazily: a command whose git answers are cached spawns no git
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10,
                             env=_git_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GIT_OPTIONAL_LOCKS", "0")  # read-only queries must not take the index lock
    return env


@lru_cache(maxsize=64)
def _detect(cwd: str, cache: str | None = None) -> tuple[str, str, bool]:
    here = Path(cwd)
    found = _find_work_tree(here)
    if found is _ASK_GIT:
        top = _git(here, "rev-parse", "--show-toplevel")
        found = (Path(top).resolve(), None) if top else None  # git answers the root commits too
    if found is not None:
        root, dirs = found  # type: ignore[misc]
        key = _pinned_key(root, dirs)
        if key is None:
            roots = _root_commits(root, dirs, Path(cache) if cache else None)
            # Several root commits (merged histories): the smallest hash is stable and unique.
            key = "git-" + sorted(roots.split())[0] if roots else None
        if key:
            _pin_key(root, dirs, key)
            return str(root), key, True
        return str(root), path_key(root), True
    # Outside git: the nearest ancestor that already has a shared store, else the cwd itself.
    for d in (here, *here.parents):
        if (d / ".pi" / "realmem").is_dir():
            return str(d), path_key(d), False
    return str(here), path_key(here), False


def detect(cwd: Path, cache: Path | None = None) -> Project:
    """The project ``cwd`` belongs to.  Cached per process (and the root commit per HEAD in
    ``cache``, a realmem home, when given); ``forget_cache`` after git init/commit."""
    root, key, is_git = _detect(str(Path(cwd).resolve()), str(cache) if cache is not None else None)
    return Project(Path(root), key, is_git)


_ASK_GIT = object()
# Variables that change where git looks for the repository: with any of them set, git decides.
_DISCOVERY_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES",
                  "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")
# Config that moves the work tree or makes it bare, or pulls in other config: git decides.
_UNUSUAL_CONFIG = re.compile(r"^\s*(worktree\b|bare\s*=\s*(true|yes|on|1)\b|\[\s*include)", re.M | re.I)
_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
# The key, once known, is kept where every later look finds it first, so a merge of an
# unrelated history or an amended root commit does not change it: in the repository's common
# git dir (shared by its worktrees) and, where the project has a shared store, in the store
# (committed, so a shallow clone, whose root commit is not the real one, finds it too).
KEY_FILE = "realmem-key"
SHARED_KEY_FILE = ".project-key"
_KEY = re.compile(r"git-[0-9a-f]{40}([0-9a-f]{24})?")


def _pinned_key(root: Path, dirs: _GitDirs | None) -> str | None:
    for f in _key_files(root, dirs):
        text = _read(str(f))
        if text and _KEY.fullmatch(text):
            return text
    return None


def _key_files(root: Path, dirs: _GitDirs | None) -> list[Path]:
    common = dirs.common if dirs is not None else _common_dir(root)
    return ([common / KEY_FILE] if common else []) + [root / ".pi" / "realmem" / SHARED_KEY_FILE]


def _inside(path: Path, root: Path) -> bool:
    """Whether ``path``'s real location is in the project (no symlink leads it elsewhere)."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root)) and not any(
        p.is_symlink() for p in (path, *path.parents) if p.is_relative_to(root) and p != root)


def _common_dir(root: Path) -> Path | None:
    common = _git(root, "rev-parse", "--path-format=absolute", "--git-common-dir")
    return Path(common) if common else None


def _pin_key(root: Path, dirs: _GitDirs | None, key: str) -> None:
    """Keep ``key`` where it is not kept yet; a key already kept is never replaced (a teammate
    whose clone computes another key leaves the shared record alone).  Not from a shallow clone
    or a rewritten history, whose root commits are not the project's: there only a key found
    kept (the full clone's, in the shared store) is copied."""
    common = dirs.common if dirs is not None else _common_dir(root)
    if common is None or (_history_rewritten(common) and _pinned_key(root, dirs) != key):
        return
    for f in _key_files(root, dirs):
        # The shared record is written with the first fact realmem writes to the shared store
        # (``pin_shared_key``), so it lands in the same commit and never appears on its own.
        if f.name != SHARED_KEY_FILE:
            _write_key(f, key)


def pin_shared_key(project: Project) -> None:
    """Record the project's key in its shared store, once, when realmem writes a fact there.
    Not from a shallow clone or a rewritten history (their root commits are not the project's)
    and not into a store linked out of the project."""
    root = project.root
    f = root / ".pi" / "realmem" / SHARED_KEY_FILE
    if (not project.is_git or not project.key.startswith("git-") or _read(str(f)) is not None
            or not f.parent.is_dir() or not _inside(f.parent, root)):
        return
    common = _common_dir(root)
    if common is None or _history_rewritten(common):
        return
    _write_key(f, project.key)


def in_history(root: Path, key: str) -> bool:
    """Whether ``key``'s commit is in the history of ``root``'s HEAD: a key this repository
    once had (a shallow clone's since unshallowed, a root before an amend), not another's."""
    sha = key.removeprefix("git-")
    return key.startswith("git-") and bool(_SHA.fullmatch(sha)) and \
        _git(root, "merge-base", "--is-ancestor", sha, "HEAD") is not None


def _write_key(f: Path, key: str) -> None:
    try:
        if _read(str(f)) is None:
            atomic_write_text(f, key + "\n")
    except OSError:
        pass  # a read-only checkout keeps computing the key, as before


ROOTS_FILE = "git-roots.json"
MAX_ROOTS = 256  # HEADs remembered; each new HEAD costs one `git rev-list`


def _find_work_tree(here: Path) -> tuple[Path, _GitDirs] | None | object:
    """The work tree ``here`` is in and its git dirs, read from the file system as git itself
    discovers them; None outside git; _ASK_GIT when only git can tell."""
    if any(os.environ.get(v) for v in _DISCOVERY_ENV) or ".git" in here.parts:
        return _ASK_GIT
    try:
        dev = os.stat(here).st_dev
        for d in (here, *here.parents):
            if os.stat(d).st_dev != dev:
                return _ASK_GIT  # git stops at a filesystem boundary
            if os.path.exists(d / ".git"):
                break
            if os.path.isfile(d / "HEAD") and os.path.isdir(d / "refs"):
                return _ASK_GIT  # inside a bare repository or a git dir
        else:
            return None
        dirs = _git_dirs(d)
        uid = os.getuid()
        if (dirs is None or not os.path.isfile(dirs.gitdir / "HEAD") or not os.path.isdir(dirs.common / "objects")
                or os.stat(d).st_uid != uid or os.stat(dirs.gitdir).st_uid != uid):
            return _ASK_GIT  # not a repository git would use as is (or safe.directory decides)
        for config in (dirs.common / "config", dirs.gitdir / "config.worktree"):
            if config.exists() and _UNUSUAL_CONFIG.search(config.read_text(encoding="utf-8", errors="replace")):
                return _ASK_GIT
    except OSError:
        return _ASK_GIT
    return d, dirs


def _root_commits(root: Path, dirs: _GitDirs | None, cache: Path | None) -> str | None:
    """``git rev-list --max-parents=0 HEAD``: from ``cache`` when this HEAD was seen before."""
    head = read_head(root, dirs) if dirs is not None else None
    cacheable = (cache is not None and head is not None and _SHA.fullmatch(head) is not None
                 and dirs is not None and not _history_rewritten(dirs.common))
    if not cacheable:
        return _git(root, "rev-list", "--max-parents=0", "HEAD")
    path = cache / ROOTS_FILE  # type: ignore[operator]
    known = read_cache(path)
    if isinstance(known.get(head), str):
        return known[head]
    roots = _git(root, "rev-list", "--max-parents=0", head)  # type: ignore[arg-type]
    if roots:
        keep_in_cache(path, known, head, roots, MAX_ROOTS)  # type: ignore[arg-type]
    return roots


def _history_rewritten(common: Path) -> bool:
    """A shallow clone, grafts or replace refs can give the same HEAD other root commits."""
    if (common / "shallow").exists() or (common / "info" / "grafts").exists() or (common / "refs" / "replace").exists():
        return True
    try:
        with open(common / "packed-refs", "rb") as f:
            return b" refs/replace/" in f.read()
    except OSError:
        return False


@attrs.define
class _GitDirs:
    gitdir: Path  # this worktree's git dir (HEAD lives here)
    common: Path  # the shared git dir (refs, packed-refs)
    # Reftable repositories keep refs in binary tables: git answers, once per change of the table list.
    reftable_stamp: tuple[str, int] | None = None
    reftable_head: str | None = None


def _git_dirs(root: Path) -> _GitDirs | None:
    dot = root / ".git"
    try:
        if dot.is_dir():
            gitdir = dot
        else:  # a linked worktree or submodule: "gitdir: <path>"
            text = dot.read_text(encoding="utf-8").strip()
            if not text.startswith("gitdir:"):
                return None
            gitdir = (root / text[len("gitdir:"):].strip()).resolve()
        common = gitdir
        commondir = gitdir / "commondir"
        if commondir.is_file():
            common = (gitdir / commondir.read_text(encoding="utf-8").strip()).resolve()
    except OSError:
        return None
    return _GitDirs(gitdir, common)


def _packed_ref(common: Path, ref: str) -> str | None:
    try:
        with open(common / "packed-refs", encoding="utf-8") as f:
            for line in f:
                sha, _, name = line.rstrip("\n").partition(" ")
                if name == ref:
                    return sha
    except OSError:
        return None
    return None


def _read(path: str) -> str | None:
    """A small file's text; os-level calls, since this runs on every path-note hook."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)


def read_head(root: Path, dirs: _GitDirs | None) -> str | None:
    """The commit HEAD points at, read from files (tens of µs, no process); None before the
    first commit."""
    if dirs is None:
        return _git(root, "rev-parse", "--verify", "-q", "HEAD")
    head = _read(f"{dirs.gitdir}/HEAD")
    if head is None:
        return None
    if not head.startswith("ref:"):
        return head or None
    ref = head[4:].strip()
    for base in (dirs.gitdir, dirs.common):
        value = _read(f"{base}/{ref}")
        if value and not value.startswith("ref:"):
            return value
    packed = _packed_ref(dirs.common, ref)
    if packed is not None:
        return packed
    try:
        stamp = (head, (dirs.common / "reftable" / "tables.list").stat().st_mtime_ns)
    except OSError:
        return None  # files refs and the branch has no commit yet
    if stamp != dirs.reftable_stamp:
        dirs.reftable_stamp, dirs.reftable_head = stamp, _git(root, "rev-parse", "--verify", "-q", "HEAD")
    return dirs.reftable_head


def forget_cache() -> None:
    _detect.cache_clear()


def store_kind(store: str) -> str:
    return store.split(":", 1)[0]


def default_path(store: str) -> str:
    """What a memory without paths is about: the whole store ("~" everywhere, "." the project)."""
    return "~" if store == GLOBAL else "."
