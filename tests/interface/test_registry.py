"""The command registry is the one statement of each command's params: the Pi adapter's tools
(extensions/realmem/tools.ts) and the rpc contract (docs/rpc.md) are read here and compared
with it, so a param added, renamed or retyped on one side only fails."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

from realmem.agents import mcp_server
from realmem.interface import registry
from realmem.interface.registry import COMMANDS, TOOLS

ROOT = Path(__file__).resolve().parents[2]
TOOLS_TS = ROOT / "extensions" / "realmem" / "tools.ts"
RPC_MD = ROOT / "docs" / "rpc.md"
COMMON = {p.name for p in registry.COMMON}
OPEN = {"(": ")", "[": "]", "{": "}"}
# The JSON schema type of each registry type, as TypeBox and the docs spell it.
SCHEMA_TYPE = {"str": "string", "text": "string", "strs": "array", "int": "integer", "bool": "boolean",
               "files": "array", "any": "any"}


# --- reading TypeScript object literals ---------------------------------------------------------

def closing(text: str, start: int) -> int:
    """The index of the bracket that closes ``text[start]``, strings skipped."""
    depth, i, quote = 0, start, None
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'`":
            quote = ch
        elif ch in OPEN:
            depth += 1
        elif ch in OPEN.values():
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unclosed {text[start]} at {start}")


def split_top(text: str) -> list[str]:
    """The comma-separated parts of ``text`` outside brackets and strings."""
    parts, start, i = [], 0, 0
    while i < len(text):
        ch = text[i]
        if ch in OPEN or ch in "\"'`":
            i = closing(text, i) if ch in OPEN else _string_end(text, i)
        elif ch == ",":
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _string_end(text: str, i: int) -> int:
    quote, i = text[i], i + 1
    while text[i] != quote:
        i += 2 if text[i] == "\\" else 1
    return i


def entries(obj: str) -> dict[str, str]:
    """``{ key: value, ... }`` as key -> value text."""
    inner = obj.strip()[1:-1]
    out = {}
    for part in split_top(inner):
        key, _, value = part.partition(":")
        out[key.strip()] = value.strip()
    return out


def string(value: str) -> str:
    return json.loads(value)


def ts_param(expr: str, consts: dict[str, str]) -> dict[str, Any]:
    """A TypeBox schema expression as {type, required, description, choices, min_items}."""
    required = True
    if expr.startswith("Type.Optional("):
        required, expr = False, expr[len("Type.Optional("):-1].strip()
    expr = consts.get(expr, expr)
    options = entries(expr[expr.rindex("{"):closing(expr, expr.rindex("{")) + 1]) if "{" in expr else {}
    if expr.startswith("StringEnum("):
        kind, choices = "string", tuple(re.findall(r'"([^"]*)"', expr[:expr.index("]")]))
    else:
        kind = {"Type.Array": "array", "Type.String": "string", "Type.Integer": "integer",
                "Type.Boolean": "boolean"}[expr[:expr.index("(")]]
        choices = ()
    return {"type": kind, "required": required, "description": string(options.get("description", '""')),
            "choices": choices, "min_items": int(options.get("minItems", 0)),
            "minimum": int(options["minimum"]) if "minimum" in options else None}


def ts_tools(source: str) -> dict[str, dict[str, Any]]:
    """Every ``pi.registerTool({...})`` of tools.ts: label, description, rpc method, params."""
    consts = {m.group(1): source[m.end():closing(source, source.index("(", m.end())) + 1]
              for m in re.finditer(r"^const (\w+) = ", source, re.M)}
    tools = {}
    for m in re.finditer(r"pi\.registerTool\(", source):
        block = source[m.end():closing(source, m.end()) + 1]
        fields = entries(block)
        params_obj = fields["parameters"][len("Type.Object("):-1]
        method = re.search(r'run\(host, "(\w+)"', block)
        tools[string(fields["name"])] = {
            "label": string(fields["label"]), "description": string(fields["description"]),
            "method": method.group(1) if method else None,
            "params": {k: ts_param(v, consts) for k, v in entries(params_obj).items()}}
    return tools


def registry_tool(command: registry.Command) -> dict[str, Any]:
    return {"label": command.title, "description": command.description, "method": command.name,
            "params": {p.name: {"type": SCHEMA_TYPE[p.type], "required": p.required, "description": p.help,
                                "choices": p.choices, "min_items": p.min_items,
                                "minimum": 1 if p.type == "int" else None}
                       for p in command.tool_params}}


def tool_differences(source: str) -> list[str]:
    found = ts_tools(source)
    out = [f"tool {n}: only in the registry" for n in TOOLS.keys() - found.keys()]
    out += [f"tool {n}: only in tools.ts" for n in found.keys() - TOOLS.keys()]
    for name in TOOLS.keys() & found.keys():
        mine, theirs = registry_tool(TOOLS[name]), found[name]
        out += [f"tool {name}: {k} differs: {mine[k]!r} != {theirs[k]!r}"
                for k in ("label", "description", "method") if mine[k] != theirs[k]]
        if list(mine["params"]) != list(theirs["params"]):
            out.append(f"tool {name}: params {list(mine['params'])} != {list(theirs['params'])}")
        for p in mine["params"].keys() & theirs["params"].keys():
            out += [f"tool {name}: {p}.{k}: {v!r} != {theirs['params'][p][k]!r}"
                    for k, v in mine["params"][p].items() if v != theirs["params"][p][k]]
    return out


def test_the_pi_tools_are_the_registrys() -> None:
    source = TOOLS_TS.read_text(encoding="utf-8")
    assert len(ts_tools(source)) == 5 and ts_tools(source)["realmem_forget"]["params"]["ids"]["min_items"] == 1
    assert tool_differences(source) == []


def test_the_tools_check_finds_a_param_on_one_side_only() -> None:
    source = TOOLS_TS.read_text(encoding="utf-8")
    listed = ('scope: Type.Optional(Scope),\n\t\t}),\n\t\tasync execute(_toolCallId, params, signal, _onUpdate, '
              'ctx) {\n\t\t\treturn run(host, "list"')
    added = source.replace(listed, listed.replace("\n\t\t})", "\n\t\t\tquery: Type.Optional(Type.String()),\n\t\t})"))
    assert added != source
    assert tool_differences(added) == ["tool realmem_list: params ['page', 'scope'] != ['page', 'scope', 'query']"]
    retyped = source.replace('minItems: 1, description: "Memory ids or unique prefixes"',
                             'description: "Memory ids or unique prefixes"')
    assert tool_differences(retyped) == ["tool realmem_forget: ids.min_items: 1 != 0"]
    optional = source.replace('caption: Type.String({', 'caption: Type.Optional(Type.String({').replace(
        '"One-line summary of the fact" }),', '"One-line summary of the fact" })),')
    assert tool_differences(optional) == ["tool realmem_remember: caption.required: True != False"]


def literal_keys(obj: str) -> set[str]:
    """The keys an object literal gives, spreads of literals included (``...(x ? { only } : {})``);
    a spread of a variable (``...params``, ``...base(ctx)``) names none."""
    keys = set()
    for part in split_top(obj.strip()[1:-1]):
        if part.startswith("..."):
            for m in re.finditer(r"\{", part):
                keys |= literal_keys(part[m.start():closing(part, m.start()) + 1])
        else:
            keys.add(re.split(r"[:\s]", part, maxsplit=1)[0])
    return keys


def adapter_calls(sources: dict[str, str]) -> list[tuple[str, str, set[str]]]:
    """Every rpc call of the adapter with a literal method and params: (file, method, keys)."""
    calls = []
    for name, source in sources.items():
        for m in re.finditer(r'[(,]\s*"([a-z_]+)",\s*\{', source):
            before = "\n".join(source[:m.start() + 1].splitlines()[-2:])  # the call's line and the one above
            if re.search(r"\.call\b|\bact\(|\bsimple\(|\brun\(", before):
                start = m.end() - 1
                calls.append((name, m.group(1), literal_keys(source[start:closing(source, start) + 1])))
    return calls


def call_differences(sources: dict[str, str]) -> list[str]:
    out = []
    for name, method, keys in adapter_calls(sources):
        if method not in COMMANDS:
            out.append(f"{name}: calls {method}, which the registry does not have")
        elif unknown := keys - COMMON - {p.name for p in COMMANDS[method].params}:
            out.append(f"{name}: {method} sends {sorted(unknown)}, which the registry does not declare")
    return out


def adapter_sources() -> dict[str, str]:
    root = TOOLS_TS.parent
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.ts"))
            if not p.name.endswith(".test.ts")}


def test_the_adapters_rpc_calls_send_only_declared_params() -> None:
    sources = adapter_sources()
    found = {(f, m) for f, m, _ in adapter_calls(sources)}
    assert {("index.ts", "strip_context_files"), ("tui/manage.ts", "edit"), ("tui/manage.ts", "show"),
            ("tools.ts", "recall"), ("commands.ts", "remember"), ("tui/debug.ts", "debug")} <= found
    assert ("index.ts", "strip_context_files", {"cwd", "system_prompt", "context_files", "only"}) in \
        adapter_calls(sources)
    assert call_differences(sources) == []
    renamed = sources | {"tui/settings.ts": sources["tui/settings.ts"].replace("{ key, value }", "{ key, val: value }")}
    assert call_differences(renamed) == [
        "tui/settings.ts: settings_set sends ['val'], which the registry does not declare"]


# --- docs/rpc.md ---------------------------------------------------------------------------------

def doc_type(text: str) -> tuple[str | None, tuple[str, ...]]:
    """A docs param type as (schema type, choices); None when the docs give none."""
    text = text.strip()
    if not text:
        return None, ()
    if text.startswith("[{"):
        return "files", ()
    if text.startswith("["):
        return "array", ()
    if text.startswith('"'):
        return "string", tuple(re.findall(r'"([^"]*)"', text))
    return {"str": "string", "int": "integer", "bool": "boolean", "path": "string"}[text], ()


def doc_methods(text: str) -> dict[str, dict[str, tuple[bool, str | None, tuple[str, ...]]]]:
    """The methods table: method -> param -> (required, type, choices)."""
    table = text[text.index("## Methods"):]
    out = {}
    for line in table.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        params = cells[1].strip("`").replace("\\|", "|")
        assert params.startswith("{") and params.endswith("}"), line
        parsed = {}
        for item in split_top(params[1:-1]):
            name, _, kind = item.partition(":")
            parsed[name.rstrip("?").strip()] = (not name.strip().endswith("?"), *doc_type(kind))
        for method in re.findall(r"`(\w+)`", cells[0]):
            out[method] = parsed
    return out


def doc_list(text: str, opener: str) -> set[str]:
    """The methods named in the parenthesis after ``opener`` (``import_*`` names every import method)."""
    start = text.index(opener) + len(opener) - 1
    named = re.findall(r"`([\w*]+)`", text[start:closing(text, start)])
    return {m for n in named for m in COMMANDS if m == n or n.endswith("*") and m.startswith(n[:-1])}


def doc_differences(text: str) -> list[str]:
    found = doc_methods(text)
    out = [f"method {n}: only in the registry" for n in COMMANDS.keys() - found.keys()]
    out += [f"method {n}: only in docs/rpc.md" for n in found.keys() - COMMANDS.keys()]
    for name in COMMANDS.keys() & found.keys():
        command, documented = COMMANDS[name], found[name]
        names = {p.name for p in command.params}
        if names != documented.keys() - COMMON:
            out.append(f"method {name}: params {sorted(names)} != {sorted(documented.keys() - COMMON)}")
        if command.progress != ("progress_token" in documented):
            out.append(f"method {name}: progress is {command.progress}, docs/rpc.md disagree on progress_token")
        for p in command.params:
            if p.name not in documented:
                continue
            required, kind, choices = documented[p.name]
            if required != p.required:
                out.append(f"method {name}: {p.name} required {p.required} != {required}")
            if kind is not None and kind != (p.type if p.type == "files" else SCHEMA_TYPE[p.type]):
                out.append(f"method {name}: {p.name} type {p.type} != {kind}")
            if choices and choices != p.choices:  # `str`: the rpc also takes aliases (project-shared)
                out.append(f"method {name}: {p.name} choices {p.choices} != {choices}")
    if (slow := doc_list(text, "Methods that may wait on the network or run long (")) != registry.SLOW:
        out.append(f"slow methods {sorted(registry.SLOW)} != {sorted(slow)}")
    progress = {c.name for c in COMMANDS.values() if c.progress}
    if (named := doc_list(text, "while a\nlong request (")) != progress:
        out.append(f"progress methods {sorted(progress)} != {sorted(named)}")
    return out


def test_docs_rpc_md_states_the_registrys_params() -> None:
    text = RPC_MD.read_text(encoding="utf-8")
    assert doc_methods(text)["recall"]["queries"] == (False, "array", ())
    assert doc_differences(text) == []


def test_the_docs_check_finds_a_param_on_one_side_only() -> None:
    text = RPC_MD.read_text(encoding="utf-8")
    dropped = text.replace("`{cwd, session, ids: [str]}`", "`{cwd, session}`")
    assert doc_differences(dropped) == ["method forget: params ['ids'] != []"]
    retyped = text.replace("`{cwd, page?, scope?}`", "`{cwd, page?: str, scope?}`")
    assert doc_differences(retyped) == ["method list: page type int != string"]
    quick = text.replace("`recall`, `retry`", "`retry`")
    assert doc_differences(quick)[0].startswith("slow methods")


# --- the Python side ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", [n for n, c in COMMANDS.items() if c.handler or c.cli])
def test_every_handler_takes_its_commands_arguments(name: str) -> None:
    command = COMMANDS[name]
    if command.handler is None:  # served by the rpc child itself; the CLI has a function
        inspect.signature(command.function(cli=True)).bind(object(), **command.arguments({}))
        return
    extra = {"later": print} if command.later else {}
    extra |= {"progress": print} if command.progress else {}
    inspect.signature(command.function()).bind(object(), **command.arguments({}), **extra)
    if command.cli:  # the CLI's own function takes what the CLI's params give
        on_cli = {p.keyword: p.default for p in command.params if p.cli is not None}
        inspect.signature(command.function(cli=True)).bind(object(), **on_cli)


def test_commands_the_front_end_serves_are_the_rpc_servers_own() -> None:
    from realmem.interface.rpc import Server
    own = {name[3:] for name in dir(Server) if name.startswith("on_")}
    assert own == {n for n, c in COMMANDS.items() if c.handler is None}


def test_the_mcp_tools_schemas_are_the_registrys(tmp_path: Path) -> None:
    server = mcp_server.Server(str(tmp_path / "home"), str(tmp_path))
    try:
        listed = {t.name: t for t in server.mcp._tool_manager.list_tools()}
    finally:
        server.backend.close()
    assert listed.keys() == TOOLS.keys()
    for name, command in TOOLS.items():
        tool = listed[name]
        assert (tool.title, tool.description) == (command.title, command.description)
        props = tool.parameters["properties"]
        assert list(props) == [p.name for p in command.tool_params]
        assert tool.parameters.get("required", []) == [p.name for p in command.tool_params if p.required]
        for p in command.tool_params:
            assert props[p.name]["description"] == p.help
    recall = listed["realmem_recall"].parameters["properties"]
    assert recall["scope"]["anyOf"][0]["enum"] == ["global", "shared", "personal"]
    assert recall["page"]["anyOf"][0]["minimum"] == 1
