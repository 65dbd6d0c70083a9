"""Codex's ``config.toml``: realmem's ``[mcp_servers.realmem]`` table and the ``hooks`` feature
flag, edited with tomlkit so every comment, key order and blank line of the user's file stays.

The flag is ``[features] hooks`` (codex-rs/features/src/lib.rs: ``Feature::CodexHooks``, key
``hooks``; ``codex_hooks`` is its deprecated alias).  Current Codex enables it by default;
install writes it anyway, so a file that turned hooks off gets them back and the diff says so.

Each edit takes a document and returns a new one: the planner in ``realmem.agents.install``
compares before and after.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import tomlkit
from tomlkit.items import Table
from tomlkit.toml_document import TOMLDocument

from realmem.agents.edits import drop, our_server
from realmem.errors import RealmemError

SERVER_NAME = "realmem"
FEATURE = "hooks"


class ConfigError(RealmemError):
    """A config.toml realmem cannot edit (a key of the wrong type)."""


def parse(text: str) -> TOMLDocument:
    """ValueError (tomlkit's ParseError) for a file that is not TOML."""
    return tomlkit.parse(text)


def dump(doc: TOMLDocument) -> str:
    return tomlkit.dumps(doc)


def plain(doc: TOMLDocument) -> dict[str, Any]:
    return doc.unwrap()


def _copy(doc: TOMLDocument) -> TOMLDocument:
    return tomlkit.parse(tomlkit.dumps(doc))


def _table(doc: TOMLDocument, key: str, *, super_table: bool = False) -> MutableMapping[str, Any]:
    """``doc[key]``, created when missing: a table, or the proxy tomlkit gives for one whose
    sub-tables are spread over the file (``[mcp_servers.a]`` ... ``[features]`` ... ``[mcp_servers.b]``)."""
    if key not in doc:
        doc[key] = tomlkit.table(is_super_table=super_table)
    table = doc[key]
    if not isinstance(table, MutableMapping):
        raise ConfigError(f"{key} in config.toml is not a table; fix the file by hand first")
    return table


def _value(item: Any) -> Any:
    return item.unwrap() if hasattr(item, "unwrap") else item


def server_table(entry: dict[str, Any], env_vars: list[str]) -> Table:
    """The stdio entry as Codex reads it; ``env_vars``: Codex passes only those (and a fixed few) on."""
    table = tomlkit.table()
    table["command"] = entry["command"]
    table["args"] = entry["args"]
    table["env_vars"] = env_vars
    return table


def add(doc: TOMLDocument, entry: dict[str, Any], env_vars: list[str]) -> TOMLDocument:
    empty = not doc.body
    doc = _copy(doc)
    servers = _table(doc, "mcp_servers", super_table=True)
    current = servers.get(SERVER_NAME)
    if current is not None and not our_server(_value(current)):
        raise ConfigError(f"an MCP server named {SERVER_NAME!r} that realmem did not write is already configured")
    table = server_table(entry, env_vars)
    if _value(current) != table.unwrap():
        servers[SERVER_NAME] = table
    features = _table(doc, "features")
    if features.get(FEATURE) is not True:
        features[FEATURE] = True
    # A new file starts with its first table, not with the blank line tomlkit puts before it.
    return parse(dump(doc).lstrip("\n")) if empty else doc


def remove_server(doc: TOMLDocument) -> TOMLDocument:
    doc = _copy(doc)
    drop(doc, "mcp_servers", SERVER_NAME, lambda entry: our_server(_value(entry)))
    return doc


def strip(doc: TOMLDocument) -> TOMLDocument:
    """The document without anything install writes or changes (the server, the flag whatever
    its value): what uninstall compares with the file as install found it."""
    doc = remove_server(doc)
    drop(doc, "features", FEATURE, lambda value: True)
    return doc


def snippet(entry: dict[str, Any], env_vars: list[str]) -> str:
    """The server table alone, for ``realmem install mcp --client codex``."""
    doc = tomlkit.document()
    _table(doc, "mcp_servers", super_table=True)[SERVER_NAME] = server_table(entry, env_vars)
    return dump(doc).lstrip("\n")
