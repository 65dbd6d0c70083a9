"""Path frames, conversion and matching for path-scoped memories.

A memory's ``paths`` are files, directories or globs. On disk they live in the frame of the
store that holds them: project stores keep them relative to the project root ("." is the
whole project), the global store keeps ``~/...`` under the user home and absolute paths
elsewhere ("~" is everywhere). Everything that compares paths (matching a touched path,
overlap between facts, existence checks) works on absolute posix patterns, so this module is
the one place that converts between the agent's input, the stored frames and absolute form.

All work is lexical: symlinks are never resolved, so a stored path means what the user
wrote. Glob syntax: ``*``, ``?`` and ``[...]`` within one segment (they match dotfiles too),
``**`` as a whole segment for any number of segments, including zero. A pattern also matches
its own literal text, so a file really named ``app/[id]/page.tsx`` still matches itself.

The real home directory is never consulted: callers pass ``home`` (and ``cwd``/``root``)
explicitly.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from realmem.errors import UsageError

__all__ = [
    "PathError",
    "PathIndex",
    "check_input",
    "control_character",
    "convert_paths",
    "exists",
    "in_project",
    "matches",
    "normalize_input",
    "overlap",
    "reexpress",
    "specificity",
    "to_absolute",
    "to_store_frame",
    "touched_paths_from_bash",
]

PROJECT = "project"
GLOBAL = "global"
_KINDS = (PROJECT, GLOBAL)

# Bash words checked against the disk per command: the hook runs after every tool call.
_MAX_BASH_WORDS = 64
# Directory entries an existence search of a glob may visit before giving up.
_EXISTS_BUDGET = 20_000

_GLOB_CHARS = re.compile(r"[*?]|\[.*\]")
_SHELL_OPERATORS = frozenset(";&|<>()")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=(.*)\Z", re.DOTALL)


class PathError(UsageError, ValueError):
    """A path that cannot be accepted or cannot be expressed in the requested frame."""


# --- lexical helpers -------------------------------------------------------------------


def _is_glob_segment(segment: str) -> bool:
    return _GLOB_CHARS.search(segment) is not None


def _has_glob(pattern: str) -> bool:
    return any(_is_glob_segment(s) for s in pattern.split("/"))


def has_glob(pattern: str) -> bool:
    """Whether the pattern holds a glob segment (``*``, ``?``, ``[...]``, ``**``)."""
    return _has_glob(pattern)


def _segments(abs_pattern: str) -> list[str]:
    return [s for s in abs_pattern.split("/") if s]


def _collapse(path: str) -> str:
    """Collapse '.', '..', repeated and trailing slashes of an absolute posix path.

    '..' after a glob segment is refused: it cannot be resolved without knowing what the glob
    matched.
    """
    out: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if out:
                if _is_glob_segment(out[-1]):
                    raise PathError(f"'..' after a glob segment cannot be resolved: {path!r}")
                out.pop()
            continue
        out.append(segment)
    return "/" + "/".join(out)


def _base(path: Path, name: str) -> str:
    text = path.as_posix()
    if not text.startswith("/"):
        raise PathError(f"{name} must be absolute, got {text!r}")
    return _collapse(text)


def _check_kind(kind: str) -> None:
    if kind not in _KINDS:
        raise PathError(f"unknown store kind {kind!r}; expected one of {_KINDS}")


def _require_absolute(pattern: str) -> None:
    if not pattern.startswith("/"):
        raise PathError(f"expected an absolute path, got {pattern!r}")


def _is_under_or_equal(path: str, base: str) -> bool:
    return path == base or base == "/" or path.startswith(base + "/")


def _relative(path: str, base: str) -> str:
    """Path relative to base (which must contain it); '' when they are equal."""
    if path == base:
        return ""
    return path[1:] if base == "/" else path[len(base) + 1 :]


def _join(base: str, relative: str) -> str:
    if not relative:
        return base
    return "/" + relative if base == "/" else f"{base}/{relative}"


def _literal_prefix(abs_pattern: str) -> str:
    """The deepest directory every match of the pattern lies in (its literal leading part)."""
    literal: list[str] = []
    for segment in _segments(abs_pattern):
        if _is_glob_segment(segment):
            break
        literal.append(segment)
    return "/" + "/".join(literal)


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# --- glob compilation ------------------------------------------------------------------

# A parsed segment: literal characters as 1-character strings, wildcards as the tokens below,
# and character classes as ("class", regex) tuples.
_ANY = "\x00*"
_ONE = "\x00?"
_Token = str | tuple[str, str]


def _parse_segment(segment: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(segment)
    while i < n:
        c = segment[i]
        i += 1
        if c == "*":
            tokens.append(_ANY)
        elif c == "?":
            tokens.append(_ONE)
        elif c == "[":
            j = i
            if j < n and segment[j] in "!^":
                j += 1
            if j < n and segment[j] == "]":
                j += 1
            while j < n and segment[j] != "]":
                j += 1
            if j >= n:
                tokens.append("[")
                continue
            body = segment[i:j].replace("\\", "\\\\")
            i = j + 1
            if body[0] in "!^":
                body = "^" + body[1:]
            elif body[0] == "[":
                body = "\\" + body
            tokens.append(("class", f"(?!/)[{body}]"))
        else:
            tokens.append(c)
    return tokens


def _segment_regex(segment: str) -> str:
    """Regex text for one segment; a malformed class (e.g. [z-a]) falls back to literal text."""
    parts: list[str] = []
    for token in _parse_segment(segment):
        if token == _ANY:
            parts.append("[^/]*")
        elif token == _ONE:
            parts.append("[^/]")
        elif isinstance(token, tuple):
            parts.append(token[1])
        else:
            parts.append(re.escape(token))
    text = "".join(parts)
    try:
        re.compile(text)
    except re.error:
        return re.escape(segment)
    return text


@functools.lru_cache(maxsize=4096)
def _compiled_segment(segment: str) -> re.Pattern[str]:
    return re.compile(_segment_regex(segment) + r"\Z", re.DOTALL)


@functools.lru_cache(maxsize=16384)
def _covering_regex(abs_pattern: str) -> re.Pattern[str]:
    """Matches the pattern's locations and everything below them."""
    # (?=[^/]) keeps "*" from matching an empty segment (the root "/" is not "/*").
    parts = ["(?:/[^/]+)*" if s == "**" else "/(?=[^/])" + _segment_regex(s) for s in _segments(abs_pattern)]
    return re.compile("".join(parts) + r"(?:/.*)?\Z", re.DOTALL)


# --- input and frames ------------------------------------------------------------------


def control_character(text: str) -> str | None:
    """The first control character of ``text`` (C0, DEL, C1, or a line or paragraph separator)
    as ``U+XXXX``, or None.  A path holding one could end the line it is shown on and forge
    what follows it in the agent's context; no real path needs one."""
    for ch in text:
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            return f"U+{ord(ch):04X}"
    return None


def normalize_input(raw: str, *, cwd: Path, home: Path) -> str:
    """Turn an agent-supplied path (relative to cwd, ~/..., or absolute) into an absolute pattern.

    Surrounding whitespace is dropped (agents add it by accident); '.' and '..' collapse
    lexically and glob characters are kept as they are.  A control character (a newline, an
    escape) anywhere else is refused.
    """
    text = raw.strip()
    if not text:
        raise PathError("empty path")
    if "\x00" in text:
        raise PathError("path contains a NUL byte")
    if (bad := control_character(text)) is not None:
        raise PathError(f"path contains a control character ({bad}); paths are one line of printable text")
    if text == "~" or text.startswith("~/"):
        combined = _base(home, "home") + text[1:]
    elif text.startswith("~"):
        raise PathError(f"only ~ and ~/ are supported, not another user's home: {raw!r}")
    elif text.startswith("/"):
        combined = text
    else:
        combined = _base(cwd, "cwd") + "/" + text
    return _collapse(combined)


def in_project(abs_pattern: str, root: Path) -> bool:
    """Whether every location the pattern can name lies in the project (root included)."""
    _require_absolute(abs_pattern)
    return _is_under_or_equal(_collapse(abs_pattern), _base(root, "root"))


def to_store_frame(abs_pattern: str, *, kind: str, root: Path | None, home: Path) -> str:
    """Express an absolute pattern the way a store of the given kind writes it to disk."""
    _check_kind(kind)
    _require_absolute(abs_pattern)
    path = _collapse(abs_pattern)
    if kind == PROJECT:
        if root is None:
            raise PathError("a project store needs a project root")
        base = _base(root, "root")
        if not _is_under_or_equal(path, base):
            raise PathError(f"{path!r} is outside the project {base!r}")
        return _relative(path, base) or "."
    home_text = _base(home, "home")
    if _is_under_or_equal(path, home_text):
        relative = _relative(path, home_text)
        return f"~/{relative}" if relative else "~"
    return path


def to_absolute(stored: str, *, kind: str, root: Path | None, home: Path) -> str:
    """Read a stored path back into an absolute pattern.

    Hand-edited spellings such as "./src/" are tolerated; anything that would leave its frame
    (a project path with '..' above the root, an absolute or ~ path in a project store, a
    relative path in the global store) is refused.
    """
    _check_kind(kind)
    if not stored:
        raise PathError("empty stored path")
    if "\x00" in stored:
        raise PathError(f"stored path contains a NUL byte: {stored!r}")
    if kind == PROJECT:
        if root is None:
            raise PathError("a project store needs a project root")
        if stored.startswith(("/", "~")):
            raise PathError(f"project paths are relative to the root, got {stored!r}")
        base = _base(root, "root")
        path = _collapse(base + "/" + stored)
        if not _is_under_or_equal(path, base):
            raise PathError(f"{stored!r} leaves the project {base!r}")
        return path
    if stored == "~" or stored.startswith("~/"):
        return _collapse(_base(home, "home") + stored[1:])
    if stored.startswith("/"):
        return _collapse(stored)
    raise PathError(f"global paths must start with ~/ or /, got {stored!r}")


def _default(kind: str) -> str:
    return "." if kind == PROJECT else "~"


def convert_paths(
    raw_paths: list[str], *, cwd: Path, root: Path | None, home: Path
) -> tuple[str, list[str]]:
    """Pick the frame for a new fact's paths and express them in it.

    The spec's rule: a path outside the project makes the fact global, and so does having no
    project at all. No paths means the whole store.
    """
    if not raw_paths:
        kind = PROJECT if root is not None else GLOBAL
        return kind, [_default(kind)]
    absolute = [normalize_input(raw, cwd=cwd, home=home) for raw in raw_paths]
    if root is not None and all(in_project(p, root) for p in absolute):
        kind = PROJECT
    else:
        kind = GLOBAL
    return kind, _dedupe(to_store_frame(p, kind=kind, root=root, home=home) for p in absolute)


def reexpress(
    paths: list[str], *, from_kind: str, to_kind: str, root: Path | None, home: Path
) -> list[str]:
    """Re-express stored paths when a memory moves between stores.

    "~" (everywhere) narrows to "." when moved into a project; any other path outside the
    project cannot follow the memory there and raises PathError. An empty list is the store
    default and stays the default of the target store.
    """
    _check_kind(from_kind)
    _check_kind(to_kind)
    if not paths:
        return [_default(to_kind)]
    result: list[str] = []
    for stored in paths:
        if from_kind == GLOBAL and to_kind == PROJECT and stored == "~":
            result.append(".")
            continue
        absolute = to_absolute(stored, kind=from_kind, root=root, home=home)
        result.append(to_store_frame(absolute, kind=to_kind, root=root, home=home))
    return _dedupe(result)


# --- matching --------------------------------------------------------------------------


def matches(abs_pattern: str, touched_abs: str) -> bool:
    """Whether touching touched_abs concerns the pattern: it is the location or lies under it.

    Both arguments are normalized absolute paths (normalize_input output). Touching a parent
    of the pattern never matches.
    """
    _require_absolute(abs_pattern)
    _require_absolute(touched_abs)
    if _is_under_or_equal(touched_abs, abs_pattern):
        return True
    return _has_glob(abs_pattern) and _covering_regex(abs_pattern).match(touched_abs) is not None


def specificity(abs_pattern: str) -> int:
    """Rank for "most specific scope first": literal segments count 2, glob segments 1, ** 0."""
    score = 0
    for segment in _segments(abs_pattern):
        if segment == "**":
            continue
        score += 1 if _is_glob_segment(segment) else 2
    return score


def _fixed_ends(segment: str) -> tuple[str, str]:
    """Literal text every match of a glob segment must start and end with."""
    tokens = _parse_segment(segment)
    prefix: list[str] = []
    for token in tokens:
        if not isinstance(token, str) or token in (_ANY, _ONE):
            break
        prefix.append(token)
    suffix: list[str] = []
    for token in reversed(tokens):
        if not isinstance(token, str) or token in (_ANY, _ONE):
            break
        suffix.append(token)
    return "".join(prefix), "".join(reversed(suffix))


def _segments_compatible(a: str, b: str) -> bool:
    """Whether some name can match both segments (conservative: may say yes wrongly, never no)."""
    if a == b:
        return True
    a_glob, b_glob = _is_glob_segment(a), _is_glob_segment(b)
    if not a_glob and not b_glob:
        return False
    if not b_glob:
        return _compiled_segment(a).match(b) is not None
    if not a_glob:
        return _compiled_segment(b).match(a) is not None
    (a_pre, a_suf), (b_pre, b_suf) = _fixed_ends(a), _fixed_ends(b)
    prefixes_agree = a_pre.startswith(b_pre) or b_pre.startswith(a_pre)
    suffixes_agree = a_suf.endswith(b_suf) or b_suf.endswith(a_suf)
    return prefixes_agree and suffixes_agree


def _pair_overlap(a: list[str], b: list[str]) -> bool:
    """Search for a path both patterns cover, consuming segments of both in step.

    When either pattern runs out, everything below is covered by it, so they meet.
    """
    seen: set[tuple[int, int]] = set()
    stack = [(0, 0)]
    while stack:
        state = stack.pop()
        if state in seen:
            continue
        seen.add(state)
        i, j = state
        if i == len(a) or j == len(b):
            return True
        a_star, b_star = a[i] == "**", b[j] == "**"
        if a_star:
            stack.append((i + 1, j))
            if not b_star:
                stack.append((i, j + 1))
        if b_star:
            stack.append((i, j + 1))
            if not a_star:
                stack.append((i + 1, j))
        if not a_star and not b_star and _segments_compatible(a[i], b[j]):
            stack.append((i + 1, j + 1))
    return False


def overlap(a: list[str], b: list[str]) -> bool:
    """Whether some pattern of a and some pattern of b can concern a common location.

    Exact for literal paths and ``**``; two globs in the same segment are compared by their
    fixed leading and trailing text, so the answer errs towards True.
    """
    split_b = [_segments(q) for q in b]
    for p in a:
        split_p = _segments(p)
        if any(_pair_overlap(split_p, q) for q in split_b):
            return True
    return False


class _BudgetExceeded(Exception):
    pass


def exists(abs_pattern: str) -> bool:
    """Whether a literal path exists (dangling symlinks count) or a glob matches anything.

    The glob search walks only below the literal prefix, never follows symlinked directories
    through ``**`` and stops after a bounded number of directory entries. A search cut short
    answers True: a path is only reported missing when that is certain, because missing paths
    get flagged and pruned.
    """
    _require_absolute(abs_pattern)
    if os.path.lexists(abs_pattern):
        return True
    if not _has_glob(abs_pattern):
        return False
    segments = _segments(abs_pattern)
    start = next(i for i, s in enumerate(segments) if _is_glob_segment(s))
    base = "/" + "/".join(segments[:start])
    if not os.path.lexists(base):
        return False
    try:
        return _search(base, segments[start:])
    except _BudgetExceeded:
        return True


def check_input(raw: str, *, cwd: Path, home: Path) -> dict[str, str | None]:
    """What a user-typed path names, for the screens that take paths (add, manage's path edit):
    ``kind`` is file, dir, glob (matches something), missing (names nothing yet) or invalid;
    ``warning`` says what is wrong in words, None when the path is fine."""
    try:
        absolute = normalize_input(raw, cwd=cwd, home=home)
    except PathError as exc:
        return {"path": raw.strip(), "absolute": None, "kind": "invalid", "warning": str(exc)}
    if _has_glob(absolute):
        kind = "glob" if exists(absolute) else "missing"
    elif os.path.isdir(absolute):
        kind = "dir"
    else:
        kind = "file" if os.path.lexists(absolute) else "missing"
    what = "no file matches this glob" if _has_glob(absolute) else "does not exist"
    warning = f"{raw.strip()}: {what} (yet)" if kind == "missing" else None
    return {"path": raw.strip(), "absolute": absolute, "kind": kind, "warning": warning}


def _search(base: str, rest: list[str]) -> bool:
    budget = _EXISTS_BUDGET
    stack: list[tuple[str, int]] = [(base, 0)]
    seen: set[tuple[str, int]] = set()
    while stack:
        directory, index = stack.pop()
        if (directory, index) in seen:
            continue
        seen.add((directory, index))
        if index == len(rest):
            return True
        segment = rest[index]
        last = index == len(rest) - 1
        if segment == "**":
            if not os.path.isdir(directory):
                continue  # nothing lies under a file, so "a/**" does not match a file "a" (as glob)
            stack.append((directory, index + 1))
        elif not _is_glob_segment(segment):
            child = _join(directory, segment)
            if last:
                if os.path.lexists(child):
                    return True
            elif os.path.isdir(child):
                stack.append((child, index + 1))
            continue
        regex = None if segment == "**" else _compiled_segment(segment)
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    budget -= 1
                    if budget < 0:
                        raise _BudgetExceeded
                    if regex is None:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append((entry.path, index))
                    elif regex.match(entry.name):
                        if last:
                            return True
                        if entry.is_dir():
                            stack.append((entry.path, index + 1))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
    return False


def _glob_anchor(abs_pattern: str) -> str | None:
    """The last literal segment after the first glob segment, if any.

    Every path the glob matches has this name among its segments below the literal prefix,
    so the index only tries the glob for touched paths that contain it.
    """
    segments = _segments(abs_pattern)
    first = next((i for i, s in enumerate(segments) if _is_glob_segment(s)), len(segments))
    literal = [s for s in segments[first + 1 :] if not _is_glob_segment(s)]
    return literal[-1] if literal else None


class _Glob:
    __slots__ = ("regex", "keys")

    def __init__(self, regex: re.Pattern[str]) -> None:
        self.regex = regex
        self.keys: dict[str, None] = {}


class PathIndex:
    """Which memories a touched path concerns, answered in O(depth of the touched path).

    Literal patterns sit in a dict keyed by path, so a lookup walks the touched path's
    ancestors. Globs are compiled once per distinct pattern and grouped by their literal
    prefix, then by an anchor name (see _glob_anchor): only globs whose prefix is an ancestor
    of the touched path and whose anchor occurs in it are tried. A key may hold several
    patterns.
    """

    def __init__(self, entries: Iterable[tuple[str, str]] = ()) -> None:
        # A key's patterns as a tuple, not a dict: a key has one or two, and the path-note
        # index holds a key per path-scoped memory (a dict each made it much larger).
        self._patterns: dict[str, tuple[str, ...]] = {}
        self._literal: dict[str, dict[str, None]] = {}
        self._globs: dict[str, dict[str | None, dict[str, _Glob]]] = {}
        for key, pattern in entries:
            self.add(key, pattern)

    def __len__(self) -> int:
        return len(self._patterns)

    def add(self, key: str, pattern: str) -> None:
        """Attach one more absolute pattern to key (adding the same pair twice is a no-op)."""
        _require_absolute(pattern)
        patterns = self._patterns.get(key, ())
        if pattern in patterns:
            return
        self._patterns[key] = (*patterns, pattern)
        # Globs are indexed by their literal text too: a pattern matches itself literally.
        self._literal.setdefault(pattern, {})[key] = None
        if _has_glob(pattern):
            by_anchor = self._globs.setdefault(_literal_prefix(pattern), {})
            group = by_anchor.setdefault(_glob_anchor(pattern), {})
            entry = group.get(pattern)
            if entry is None:
                entry = group[pattern] = _Glob(_covering_regex(pattern))
            entry.keys[key] = None

    def remove(self, key: str) -> None:
        """Drop every pattern of key; unknown keys are ignored."""
        for pattern in self._patterns.pop(key, ()):
            keys = self._literal[pattern]
            del keys[key]
            if not keys:
                del self._literal[pattern]
            if not _has_glob(pattern):
                continue
            prefix, anchor = _literal_prefix(pattern), _glob_anchor(pattern)
            by_anchor = self._globs[prefix]
            group = by_anchor[anchor]
            entry = group[pattern]
            del entry.keys[key]
            if not entry.keys:
                del group[pattern]
            if not group:
                del by_anchor[anchor]
            if not by_anchor:
                del self._globs[prefix]

    def match(self, touched_abs: str) -> list[str]:
        """Keys with a pattern matching the normalized touched path, nearest ancestor first."""
        return list(dict.fromkeys(key for key, _ in self.match_patterns(touched_abs)))

    def match_patterns(self, touched_abs: str) -> list[tuple[str, str]]:
        """(key, pattern) for each pattern matching the normalized touched path, nearest
        ancestor first: which of a key's patterns matched (a path note ranks by it)."""
        _require_absolute(touched_abs)
        found: list[tuple[str, str]] = []
        parts = _segments(touched_abs)
        ancestor = touched_abs
        for depth in range(len(parts), -1, -1):
            if depth < len(parts):
                ancestor = ancestor[: ancestor.rfind("/")] or "/"
            keys = self._literal.get(ancestor)
            if keys:
                found.extend((key, ancestor) for key in keys)
            by_anchor = self._globs.get(ancestor)
            if not by_anchor:
                continue
            for anchor in (None, *dict.fromkeys(parts[depth:])):
                for pattern, entry in by_anchor.get(anchor, {}).items():
                    if entry.regex.match(touched_abs):
                        found.extend((key, pattern) for key in entry.keys)
        return found


# --- bash ------------------------------------------------------------------------------


def _bash_words(command: str) -> list[str]:
    """Shell words, split at operators too; unbalanced quotes are closed rather than fatal."""
    for suffix in ("", '"', "'", "\\"):
        lexer = shlex.shlex(command + suffix, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = ""
        try:
            return list(lexer)
        except ValueError:
            continue
    return command.split()


def _candidates(word: str) -> list[str]:
    if not word or all(c in _SHELL_OPERATORS for c in word):
        return []
    if word.startswith("-"):
        _, sep, value = word.partition("=")
        return [value] if sep and value else []
    assignment = _ASSIGNMENT.match(word)
    if assignment:
        return [word, assignment.group(1)] if assignment.group(1) else [word]
    return [word]


def touched_paths_from_bash(command: str, *, cwd: Path, home: Path) -> list[str]:
    """Absolute paths named by words of a bash command that exist on disk.

    Options are skipped, but the value of --flag=value and VAR=value is checked. A directory
    word counts as touched; matching makes sure that only notes at or below it fire. A glob
    word names the files it expands to; after ``cd DIR`` words are read against DIR. At most
    _MAX_BASH_WORDS words are checked, since this runs after every tool call.
    """
    found: list[str] = []
    checked = 0
    here = cwd  # moved by `cd DIR`: later words are relative to DIR, as the shell reads them
    after_cd = False
    for word in _bash_words(command):
        if after_cd and all(c in _SHELL_OPERATORS for c in word):
            here, after_cd = home, False  # `cd` alone (`cd; …`, `cd && …`) goes home
            continue
        for candidate in _candidates(word):
            if checked >= _MAX_BASH_WORDS:
                return _dedupe(found)
            checked += 1
            try:
                path = normalize_input(candidate, cwd=here, home=home)
            except PathError:
                continue
            if os.path.lexists(path):
                found.append(path)
                if after_cd and os.path.isdir(path):
                    here = Path(path)
            elif _has_glob(candidate):
                found.extend(_expand(path))
        after_cd = word == "cd"
    return _dedupe(found)


_MAX_GLOB_MATCHES = 20  # a bash glob word (`ls src/db/*.sql`) names at most this many files


def _expand(abs_pattern: str) -> list[str]:
    """The files a glob word names on disk, as the shell would expand it (no ``**``: one level a
    segment, so the hook's cost stays that of listing a few directories)."""
    import glob  # here: only a command with a glob word needs it, and the hook runs after every tool

    out = []
    for match in glob.iglob(abs_pattern):
        out.append(match)
        if len(out) >= _MAX_GLOB_MATCHES:
            break
    return sorted(out)
