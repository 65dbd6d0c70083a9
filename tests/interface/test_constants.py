"""The TypeScript adapter keeps copies of a few core constants (it must work, and say the
right thing, while the core child is down).  Each copy is read from the adapter's source here
and compared with the core's value, so changing one side without the other fails."""

from __future__ import annotations

import re
from pathlib import Path

from realmem import errors
from realmem.interface import manage
from realmem.config import DEFAULTS
from realmem.stores.project import SCOPES
from realmem.interface import registry
from realmem.interface.registry import SLOW

ADAPTER = Path(__file__).resolve().parents[2] / "extensions" / "realmem"


def ts(name: str) -> str:
    return (ADAPTER / name).read_text(encoding="utf-8")


def ts_block(source: str, opener: str) -> str:
    """The text between ``opener`` and the brace or bracket that closes it."""
    start = source.index(opener) + len(opener)
    close = {"{": "}", "[": "]"}[opener[-1]]
    return source[start:source.index(close, start)]


def ts_strings(block: str) -> list[str]:
    return re.findall(r'"([^"]*)"', block)


def test_scope_lists_match_the_core() -> None:
    assert ts_strings(ts_block(ts("commands.ts"), "const STORES = [")) == list(SCOPES)
    assert ts_strings(ts_block(ts("tui/manage.ts"), "const SCOPES = [")) == list(SCOPES)
    assert ts_strings(ts_block(ts("tools.ts"), "const Scope = StringEnum([")) == list(SCOPES)
    assert list(registry.SCOPE.choices) == list(SCOPES)  # the model tools' (MCP and Pi) scope enum


def test_hidden_tools_default_matches_the_core() -> None:
    assert ts_strings(ts_block(ts("core.ts"), "export const DEFAULT_HIDDEN_TOOLS = [")) == DEFAULTS["hiddenTools"]


def test_error_codes_match_the_core() -> None:
    block = ts_block(ts("rpc.ts"), "export const RpcCode = {")
    codes = {k: int(v) for k, v in re.findall(r"^\s*(\w+):\s*(-?\d+)", block, re.M)}
    assert (codes["refused"], codes["usage"], codes["internal"]) == (errors.REFUSED, errors.USAGE, errors.INTERNAL)


def test_glyph_legend_matches_the_core() -> None:
    block = ts_block(ts("tui/manage.ts"), "const TIER_TEXT: Record<string, string> = {")
    legend = {tier: text.split(" ")[0] for tier, text in re.findall(r'(\w+): "([^"]*)"', block)}
    assert legend == manage.GLYPHS
    switch = ts_block(ts("tui/manage.ts"), "private glyph(glyph: string): string {")
    assert set(re.findall(r'case "(.)":', switch)) == set(manage.GLYPHS.values()) | {"?"}


def test_timeouts_name_rpc_methods_and_unbounded_ones_run_on_the_slow_thread() -> None:
    block = ts_block(ts("core.ts"), "const TIMEOUTS: Record<string, number> = {")
    timeouts = {k: int(v.replace("_", "")) for k, v in re.findall(r"^\s*(\w+):\s*([\d_]+)", block, re.M)}
    methods = set(registry.COMMANDS)
    assert timeouts["path_notes"] > 0 and timeouts["consolidate"] == 0  # the block was read
    assert set(timeouts) <= methods, "TIMEOUTS names a method the core does not have"
    assert SLOW <= methods, "SLOW names a method the core does not have"
    # A call the adapter waits for without limit must never hold up the path-note hook.
    unbounded = {m for m, ms in timeouts.items() if ms == 0}
    assert unbounded <= SLOW
    # A slow method gets at least the default 30 s: its own thread does not make it faster.
    assert all(timeouts.get(m, 30_000) == 0 or timeouts.get(m, 30_000) >= 30_000 for m in SLOW)

