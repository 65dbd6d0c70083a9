"""Planned, undoable edits of a client's settings files: what ``realmem install`` shows as a
diff, writes once confirmed, and gives back on ``--uninstall``.

Install records in ``<REALMEM_HOME>/install.json``, keyed by the file's absolute path, the file
as it was (its text, or that it did not exist) and the directories it had to create.  When
uninstall leaves the same document as that record (realmem's entries aside), it gives back the
recorded bytes (a ``{}`` file stays ``{}``, a 4-space layout keeps its layout, TOML comments
stay), deletes a file install created and removes the directories install created once they
are empty: a ``.claude/`` that was there stays.  When the file was changed since (other keys,
hooks or servers), those edits are kept and the file is rewritten by its format.  Without a
record (another home, an install by an older realmem) a file that only realmem's entries
filled is deleted, no directory.

A file is read by a ``Format``: JSON (a file with comments, JSONC, is refused with a clear
error rather than rewritten without them) or Codex's TOML (``realmem.agents.codexconfig``,
which keeps comments).  A malformed file is refused and nothing is written.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import attrs

from realmem.errors import RealmemError
from realmem.storage.fsutil import atomic_write_text

MANIFEST = "install.json"  # in the realmem home: what install found and created, per file


class InstallError(RealmemError):
    """A settings file realmem will not touch (unreadable, malformed, commented JSON): exit 1."""


@attrs.frozen
class Format:
    name: str
    parse: Callable[[str], Any]   # text -> document; ValueError when malformed
    dump: Callable[[Any], str]
    strip: Callable[[Any], Any]   # the document without anything install writes or changes
    plain: Callable[[Any], Any] = lambda doc: doc  # a value == compares (tomlkit documents unwrap)

    def empty(self) -> Any:
        return self.parse("")


def strip_json_comments(text: str) -> str:
    """``text`` without ``//`` and ``/* */`` comments outside strings (what Gemini CLI strips)."""
    out, i, n, in_string = [], 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def parse_json(text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except ValueError as exc:
        try:
            json.loads(strip_json_comments(text))
        except ValueError:
            raise exc from None
        raise InstallError("it has comments, which realmem would lose by rewriting it; add the entries "
                           "shown by `realmem install mcp --print` by hand, or remove the comments") from None
    if not isinstance(doc, dict):
        raise InstallError("it does not hold a JSON object")
    return doc


def our_server(entry: Any) -> bool:
    """An MCP server entry realmem wrote, in any client's format (a tomlkit table is a dict;
    opencode puts the arguments into ``command``)."""
    if not isinstance(entry, dict):
        return False
    command = entry.get("command")
    args = entry.get("args") or (command[1:] if isinstance(command, list) else [])
    if not isinstance(args, list):
        return False
    # "realmem.cli" is what installs before the package move wrote; they are ours to replace.
    return bool(set(args) & {"realmem", "realmem.cli", "realmem.interface.cli"}) and "mcp" in args


def drop(doc: MutableMapping[str, Any], table: str, key: str, when: Callable[[Any], bool]) -> None:
    """Delete ``doc[table][key]`` if ``when`` says so, and the table once it is empty."""
    t = doc.get(table)
    if isinstance(t, MutableMapping) and key in t and when(t[key]):
        del t[key]
        if not t:
            del doc[table]


def dump_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


@attrs.define
class Change:
    path: Path
    before: str | None  # None: the file does not exist
    after: str | None   # None: the file is removed
    record: dict[str, Any] | None = None  # install: the file as found, for the manifest
    forget: bool = False                  # uninstall: drop the file's record once applied
    remove_dirs: list[Path] = attrs.field(factory=list)  # install created them; removed when empty

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        return "".join(difflib.unified_diff((self.before or "").splitlines(keepends=True),
                                            (self.after or "").splitlines(keepends=True),
                                            fromfile=str(self.path) if self.before is not None else "/dev/null",
                                            tofile=str(self.path) if self.after is not None else "/dev/null"))

    def apply(self) -> None:
        if self.after is None:
            self.path.unlink(missing_ok=True)
            for d in self.remove_dirs:  # deepest first
                if d.is_dir() and not any(d.iterdir()):
                    d.rmdir()
            return
        mode = (self.path.stat().st_mode & 0o777) if self.path.exists() else None  # ~/.claude.json stays private
        atomic_write_text(self.path, self.after, mode=mode)


def read(path: Path, fmt: Format) -> tuple[str | None, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, fmt.empty()
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {exc}") from None
    try:
        return text, fmt.parse(text)
    except InstallError as exc:
        raise InstallError(f"{path}: {exc}; nothing was changed") from None
    except ValueError as exc:
        raise InstallError(f"{path} is not valid {fmt.name} ({exc}); nothing was changed") from None


def _edited(path: Path, edit: Callable[[Any], Any], doc: Any) -> Any:
    try:
        return edit(doc)
    except RealmemError as exc:
        raise InstallError(f"{path}: {exc}; nothing was changed") from None


def missing_dirs(path: Path) -> list[Path]:
    """The directories above ``path`` that do not exist yet, deepest first."""
    out = []
    d = path.parent
    while not d.exists():
        out.append(d)
        d = d.parent
    return out


def target(path: Path, bound: Path, where: str) -> Path:
    """The file to read and write for ``path``: itself, or where its symlinks lead if that is
    inside ``bound`` (else InstallError: realmem never writes through a link out of it)."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError on Python 3.11)
        raise InstallError(f"cannot resolve {path} ({exc}); nothing was changed") from None
    if real == path:
        return path
    if not real.is_relative_to(bound.resolve()):
        raise InstallError(f"{path} is a symlink to {real}, outside {where}; realmem does not write through it "
                           "(replace the link with a file to install there); nothing was changed")
    return real


def plan_install(path: Path, edit: Callable[[Any], Any], remove: Callable[[Any], Any], fmt: Format) -> Change:
    """``edit`` adds realmem's entries; ``remove`` (uninstall's edit) tells whether they are there already."""
    before, doc = read(path, fmt)
    new = _edited(path, edit, doc)
    if fmt.plain(new) == fmt.plain(doc):
        return Change(path, before, before)
    record = None
    if fmt.plain(_edited(path, remove, doc)) == fmt.plain(doc):
        # The file as found, unless realmem's entries are in it already (a second install, say
        # with another home): then the first record still says what was there before realmem.
        record = {"text": before, "dirs": [str(d) for d in missing_dirs(path)]}
    return Change(path, before, fmt.dump(new), record=record)


def plan_uninstall(path: Path, edit: Callable[[Any], Any], fmt: Format, manifest: dict[str, Any]) -> Change:
    before, doc = read(path, fmt)
    new = _edited(path, edit, doc)
    if fmt.plain(new) == fmt.plain(doc):
        return Change(path, before, before)
    record = manifest.get(str(path))
    if not isinstance(record, dict):  # no record (another home, an older realmem): entries, and a file only they fill
        if not fmt.plain(fmt.strip(new)) and before is not None and fmt.plain(doc):
            return Change(path, before, None)
        return Change(path, before, fmt.dump(new))
    found = record.get("text") if isinstance(record.get("text"), str) else None  # None: there was no file
    try:
        found_doc = fmt.empty() if found is None else fmt.parse(found)
    except (ValueError, InstallError):
        found_doc = None
    if found_doc is None or fmt.plain(fmt.strip(new)) != fmt.plain(fmt.strip(found_doc)):  # edited since: keep the edits
        return Change(path, before, fmt.dump(new), forget=True)
    return Change(path, before, found, forget=True, remove_dirs=[Path(d) for d in record.get("dirs", [])])


def load_manifest(realmem_home: Path) -> dict[str, Any]:
    path = realmem_home / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise InstallError(f"cannot read {path} ({exc}); move it away to continue") from None
    return data if isinstance(data, dict) else {}


def save_manifest(realmem_home: Path, manifest: dict[str, Any]) -> None:
    atomic_write_text(realmem_home / MANIFEST, dump_json(manifest), mode=0o600)
