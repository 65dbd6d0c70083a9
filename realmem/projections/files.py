"""Fact files: Markdown with YAML frontmatter, parsed and rendered (spec: "Scopes and storage").

    ---
    id: <UUIDv7>
    caption: <one line>
    paths:
      - <path>
    created: <ISO time>
    updated: <ISO time>
    ---

    <content>

Parsing is strict about what matters (id, caption, paths, times) and tolerant of the rest:
unknown keys survive an edit because edits go through ruamel's round-trip loader.  The
frontmatter realmem itself writes (``render``) is read by a fast path that gives exactly what
ruamel would (a property test holds the two together); anything else goes to ruamel.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from realmem.stores import ids
from realmem.stores.paths import control_character
from realmem.errors import UsageError
from realmem.storage.fsutil import atomic_write_text, read_regular, remove_file

if TYPE_CHECKING:
    from ruamel.yaml import YAML

FRONT = "---"
OWN_KEYS = ("id", "caption", "paths", "created", "updated")
MAX_FILE_BYTES = 256 * 1024


class FactFileError(UsageError, ValueError):
    """A fact file that cannot be read; carries the 1-based line of the problem when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message if line is None else f"line {line}: {message}")
        self.line = line


@attrs.frozen
class Parsed:
    id: str | None  # None when a hand-written file has no id yet
    caption: str
    content: str
    paths: list[str]
    created: str | None
    updated: str | None


def _yaml() -> "YAML":
    # ruamel is imported here, not at the top: canonical files never need it, and it is a
    # large share of the start-up of commands that read no hand-edited file.
    from ruamel.yaml import YAML

    y = YAML(typ="rt")
    y.width = 4096  # keep captions on one line
    y.indent(mapping=2, sequence=4, offset=2)
    return y


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    if isinstance(value, dt.date):
        return value.isoformat() + "T00:00:00.000Z"
    return str(value)


def split(text: str) -> tuple[str, str, int]:
    """-> (frontmatter yaml, body, line number where the yaml starts)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    first_end = text.find("\n")
    if (text if first_end < 0 else text[:first_end]).rstrip() != FRONT:
        raise FactFileError("missing frontmatter: the file must start with a '---' line", 1)
    # The closing line is the first other line that is '---' and trailing whitespace: each
    # starts right after a "\n---", so only those are looked at (the body is never split).
    at = text.find("\n" + FRONT, first_end) if first_end >= 0 else -1
    while at >= 0:
        end = text.find("\n", at + 1)
        if (text[at + 1:] if end < 0 else text[at + 1:end]).rstrip() == FRONT:
            return text[first_end + 1:at], "" if end < 0 else text[end + 1:], 2
        at = text.find("\n" + FRONT, at + 1)
    raise FactFileError("frontmatter is not closed by a '---' line", 1)


def _load(front: str, first_line: int) -> Any:
    from ruamel.yaml.error import MarkedYAMLError, YAMLError  # lazily, as in _yaml

    try:
        return _yaml().load(front) if front.strip() else {}
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        if exc.context_mark is not None and (exc.context or "").startswith(("while scanning", "while parsing a flow")):
            mark = exc.context_mark  # an unclosed [, { or quote: where it was opened, not where YAML gave up
        line = first_line + mark.line if mark is not None else None
        raise FactFileError(f"invalid YAML: {exc.problem or exc}", line) from None
    except YAMLError as exc:
        raise FactFileError(f"invalid YAML: {exc}", first_line) from None


def _bad_text(value: Any) -> str | None:
    """What makes a YAML value unstorable: an escaped lone surrogate (not Unicode, cannot be
    written back as UTF-8) or a NUL; None when it is fine."""
    if isinstance(value, str):
        if "\x00" in value:
            return "a NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"an unpaired surrogate (U+{ord(value[exc.start]):04X}), which is not valid Unicode"
        return None
    if isinstance(value, dict):
        return next((b for k, v in value.items() if (b := _bad_text(k) or _bad_text(v)) is not None), None)
    if isinstance(value, list):
        return next((b for v in value if (b := _bad_text(v)) is not None), None)
    return None


_CONFLICT = re.compile(r"^<{7}(?: .*)?\n(?:.*\n)*?={7}\n(?:.*\n)*?>{7}(?: .*)?$", re.MULTILINE)


def conflict_line(text: str) -> int | None:
    """The line of the first unresolved git merge conflict (``<<<<<<<`` .. ``=======`` ..
    ``>>>>>>>``, each at a line start), or None.  Such a file holds two versions of the fact and
    the markers; it parses whenever the conflict is in the body, so it is checked apart."""
    if "<<<<<<<" not in text:  # the usual file: no regular expression run
        return None
    found = _CONFLICT.search(text)
    return None if found is None else text.count("\n", 0, found.start()) + 1


def parse(text: str) -> Parsed:
    front, body, first = split(text)
    return parse_canonical(front, body) or parse_yaml(front, body, first)


_CANON_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_CANON_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _canonical_scalar(raw: str) -> str | None:
    """The string a scalar written by ``scalar`` stands for, or None when ``raw`` is not
    exactly what ``scalar`` would write for it (then YAML rules we do not model may apply)."""
    if raw.startswith('"'):
        if not raw.isprintable():
            return None  # YAML folds or rejects some characters that JSON leaves raw
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        # A control character that JSON escaped (``\u0000``) is one YAML may reject: ruamel decides.
        ok = isinstance(value, str) and value.isprintable() and scalar(value) == raw
        return value if ok else None
    return raw if scalar(raw) == raw else None


def _canonical_time(raw: str) -> str | None:
    if _CANON_TIME.match(raw) is None:
        return None
    try:
        dt.datetime.fromisoformat(raw[:-1])  # far cheaper than strptime
    except ValueError:
        return None  # not a real date: leave the verdict to ruamel
    return raw  # what _iso gives back for the timestamp YAML reads


def parse_canonical(front: str, body: str) -> Parsed | None:
    """The fast path of ``parse``: the exact frontmatter ``render`` writes (no extra keys),
    with or without its id line (a teammate's hand-written fact), read without YAML; None
    for anything else."""
    lines = front.split("\n")
    mem_id = None
    if lines[0].startswith("id: "):
        mem_id = lines[0][4:]
        if _CANON_ID.match(mem_id) is None:
            return None
        lines = lines[1:]
    if len(lines) < 4 or not lines[0].startswith("caption: "):
        return None
    caption = _canonical_scalar(lines[0][9:])
    if caption is None or not caption.strip():
        return None
    paths: list[str] = []
    i = 1
    if lines[i] == "paths: []":
        i += 1
    elif lines[i] == "paths:":
        i += 1
        while i < len(lines) and lines[i].startswith("  - "):
            p = _canonical_scalar(lines[i][4:])
            if p is None or not p.strip():
                return None
            paths.append(p.strip())
            i += 1
        if not paths:
            return None
    else:
        return None
    if len(lines) != i + 2 or not lines[i].startswith("created: ") or not lines[i + 1].startswith("updated: "):
        return None
    created, updated = _canonical_time(lines[i][9:]), _canonical_time(lines[i + 1][9:])
    if created is None or updated is None:
        return None
    return Parsed(id=mem_id, caption=" ".join(caption.split()), content=body.strip("\n"), paths=paths,
                  created=created, updated=updated)


def parse_yaml(front: str, body: str, first: int) -> Parsed:
    """``parse`` through ruamel: any YAML frontmatter, with errors pointing at their line."""
    data = _load(front, first)
    if not isinstance(data, dict):
        raise FactFileError("frontmatter must be a mapping of keys to values", first)

    def line_of(key: str) -> int:
        try:
            return first + data.lc.key(key)[0]
        except (AttributeError, KeyError, TypeError):
            return first

    for key, value in data.items():
        if (bad := _bad_text(key) or _bad_text(value)) is not None:
            raise FactFileError(f"{key!s:.40} holds {bad}", line_of(key))

    raw_id = data.get("id")
    mem_id = None
    if raw_id is not None:
        mem_id = ids.canonical(str(raw_id))
        if mem_id is None:
            raise FactFileError(f"id {raw_id!r} is not a UUID", line_of("id"))
    caption = data.get("caption")
    if not isinstance(caption, str) or not caption.strip():
        raise FactFileError("caption is missing or empty", line_of("caption") if "caption" in data else first)
    paths = data.get("paths")
    if paths is None:
        paths = []
    elif isinstance(paths, str):
        paths = [paths]
    elif not isinstance(paths, list) or not all(isinstance(p, str) and p.strip() for p in paths):
        raise FactFileError("paths must be a list of path strings", line_of("paths"))
    for p in paths:  # as an agent's path is: one could end the line a path note shows it on
        if (bad := control_character(p.strip())) is not None:
            raise FactFileError(f"a path holds a control character ({bad}); paths are one line of printable text",
                                line_of("paths"))
    return Parsed(
        id=mem_id,
        caption=" ".join(caption.split()),
        content=body.strip("\n"),
        paths=[p.strip() for p in paths],
        created=_iso(data.get("created")),
        updated=_iso(data.get("updated")),
    )


_PLAIN_SPECIAL = re.compile(
    r"^(?:~|null|true|false|yes|no|on|off|y|n|[-+]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?"
    r"|[-+]?\.(?:inf|nan)|0x[0-9a-f]+|0o[0-7]+|\d{4}-\d\d-\d\d.*|=|<<)$",  # = and <<: YAML's value and merge keys
    re.IGNORECASE,
)
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z$")


def scalar(value: str) -> str:
    """A YAML scalar for ``value``: plain when that reads back as the same string, else a
    double-quoted JSON string (valid YAML)."""
    if (
        value
        and value == value.strip()
        and value[0] not in "-?:,[]{}#&*!|>'\"%@`"
        and ": " not in value
        and " #" not in value
        and not value.endswith(":")
        and value.isprintable()
        and not _PLAIN_SPECIAL.match(value)
    ):
        return value
    return json.dumps(value, ensure_ascii=False)


def render(*, id: str, caption: str, paths: list[str], created: str, updated: str, content: str, previous: str | None = None) -> str:
    """The file text for a memory.  With ``previous`` (the current file text), keys realmem does
    not own are kept after its own, so hand-added keys survive edits."""
    lines = [FRONT, f"id: {id}", f"caption: {scalar(' '.join(caption.split()))}"]
    if paths:
        lines.append("paths:")
        lines.extend(f"  - {scalar(p)}" for p in paths)
    else:
        lines.append("paths: []")
    for key, value in (("created", created), ("updated", updated)):
        lines.append(f"{key}: {value if _TIME.match(value) else scalar(value)}")
    extra = _extra_keys(previous) if previous is not None else ""
    return "\n".join(lines) + "\n" + extra + f"{FRONT}\n\n{content.strip(chr(10))}\n"


def _extra_keys(previous: str) -> str:
    try:
        front, body, first = split(previous)
        if parse_canonical(front, body) is not None:
            return ""  # realmem's own keys only: no YAML needed
        data = _load(front, first)
    except FactFileError:
        return ""
    if not isinstance(data, dict):
        return ""
    for key in OWN_KEYS:
        data.pop(key, None)
    if not data:
        return ""
    buf = io.StringIO()
    _yaml().dump(data, buf)
    return buf.getvalue()


_SLUG_DROP = re.compile(r"[^\w]+", re.UNICODE)


def slug(caption: str, limit: int = 60) -> str:
    s = unicodedata.normalize("NFKC", caption).lower()
    s = _SLUG_DROP.sub("-", s).strip("-_")
    return (s[:limit].rstrip("-_") or "memory")


_TAIL_LENGTHS = (8, 12, 22)


def _tail(mem_id: str) -> str:
    # The id's random tail: its head is the creation time, shared by ids made in the same
    # millisecond (e.g. by two processes), so it cannot tell them apart.
    return ids.short(mem_id).lower().replace("_", "-")


def file_name(caption: str, mem_id: str, taken: set[str]) -> str:
    """A readable, unique file name derived from the caption."""
    base = slug(caption)
    name = f"{base}.md"
    if name not in taken:
        return name
    tail = _tail(mem_id)
    for n in _TAIL_LENGTHS:
        name = f"{base}-{tail[-n:]}.md"
        if name not in taken:
            break
    return name


def renamed(name: str, mem_id: str, old_caption: str, new_caption: str) -> bool:
    """Whether a memory whose caption changes should get a new file name: when its slug
    changes and the current name is the one ``file_name`` derived from the old caption (a name
    picked by hand is kept)."""
    old = slug(old_caption)
    if old == slug(new_caption):
        return False
    tail = _tail(mem_id)
    return name in (f"{old}.md", *(f"{old}-{tail[-n:]}.md" for n in _TAIL_LENGTHS))


def write(directory: Path, name: str, text: str, *, durable: bool = True) -> bool:
    """Atomically write ``text`` unless the file already holds exactly it; True if written.
    ``durable=False`` skips the fsyncs (replay writes thousands of files, then syncs once)."""
    path = directory / name
    data = text.encode("utf-8")
    try:
        if path.stat().st_size == len(data) and read_regular(path) == data:
            return False
    except OSError:  # missing, a symlink loop, a FIFO: replaced by the fact file
        pass
    atomic_write_text(path, text, durable=durable)
    return True


def delete(directory: Path, name: str) -> None:
    remove_file(directory / name)
