"""Every command the front ends serve, declared once: its name, its typed params with their
help, whether it may run long, the function that serves it and the model tool it is.

The rpc child validates and dispatches from this table, the MCP server builds its tools'
input schemas from it, and tests compare it with the Pi adapter's tools
(extensions/realmem/tools.ts) and with docs/rpc.md.  A handler is named by dotted path and
imported when first called (as huey's registry finds a task by name): reading the table loads
nothing heavy, so the rpc child answers ``hello`` before httpx or the gate are imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from realmem.stores.project import SCOPES

TYPES = ("str", "text", "bool", "int", "strs", "files", "any")
REPLIES = ("result", "details", "text+details")
MAX_INT = 1_000_000


@attrs.frozen
class Param:
    """One param as every front end takes it.  ``type``: str; text (a caption or content: no
    NUL); bool; int (a page, from 1); strs (a list of strings, or one string); files (a list
    of {path, content}); any.  null means "not given": the handler gets ``default``.
    ``required`` is what the model tools' schemas and docs/rpc.md say; the rpc child passes
    the default for a required param that is missing, as it always has.  ``tool=False``: the
    adapter fills it in, the model never sees it.  ``cli``: how the command line spells it."""

    name: str
    type: str = attrs.field(validator=attrs.validators.in_(TYPES))
    help: str = ""
    required: bool = False
    default: Any = None
    arg: str | None = None  # the handler's keyword, when it is not ``name``
    choices: tuple[str, ...] = ()  # offered to the model and the CLI; the core also takes aliases
    min_items: int = 0
    tool: bool = True
    cli: str | None = ""  # "": option --name; "--x": option --x; "NAME": an argument; None: not on the CLI

    @property
    def keyword(self) -> str:
        return self.arg or self.name

    def problem(self, value: Any) -> str | None:
        """Why ``value`` (not None) is not of this param's type, or None."""
        kind = self.type
        if kind == "any":
            return None
        if kind in ("str", "text"):
            if not isinstance(value, str):
                return "must be a string"
            if kind == "text" and "\x00" in value:
                return "must not contain a NUL character"
            return None
        if kind == "bool":
            return None if isinstance(value, bool) else "must be true or false"
        if kind == "int":
            ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_INT
            return None if ok else "must be a whole number from 1"
        if kind == "strs":
            if isinstance(value, list):
                try:  # a session's ``shown`` ids grow into the thousands: join checks them in C
                    "".join(value)
                    return None
                except TypeError:
                    pass
            return None if isinstance(value, str) else "must be a list of strings"
        ok = isinstance(value, list) and all(  # files
            isinstance(x, dict) and isinstance(x.get("path"), str) and isinstance(x.get("content", ""), str)
            for x in value)
        return None if ok else "must be a list of {path, content} objects"

    def value(self, raw: Any) -> Any:
        """The handler's argument for an already checked ``raw`` (None: not given)."""
        if raw is None:
            return list(self.default) if isinstance(self.default, (list, tuple)) else self.default
        if self.type == "strs":  # checked: one string or a list of strings
            return [raw] if isinstance(raw, str) else [x for x in raw if x]
        if self.type in ("str", "text"):
            return str(raw)
        if self.type == "files":
            return list(raw)
        return raw  # bool, int and any are passed as given


@attrs.frozen
class Command:
    """``handler``: "module:function", called as ``function(target, **arguments)`` where the
    target is the project's app (``on="app"``) or the home's Config (``on="config"``); None
    when the front end serves the command itself (the rpc child's session start, path notes).
    ``reply``: what of the handler's ``{"text", "details"}`` the rpc child answers.  ``later``
    and ``progress``: the handler also takes the front end's ``later`` (writes after the
    reply) and ``progress`` callbacks.  ``tool``: the model tool's name, with its ``title``
    and ``description``."""

    name: str
    params: tuple[Param, ...] = ()
    handler: str | None = None
    on: str = attrs.field(default="app", validator=attrs.validators.in_(("app", "config")))
    slow: bool = False
    reply: str = attrs.field(default="result", validator=attrs.validators.in_(REPLIES))
    later: bool = False
    progress: bool = False
    tool: str | None = None
    title: str = ""
    description: str = ""
    cli: str | None = None  # "module:function" the CLI calls instead of the handler (it prints more)

    @property
    def tool_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.tool)

    def arguments(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The handler's keyword arguments for request ``params`` (checked already)."""
        return {p.keyword: p.value(params.get(p.name)) for p in self.params}

    def function(self, *, cli: bool = False) -> Callable[..., Any]:
        """The handler (``cli``: the CLI's, when it has its own), imported on first use."""
        path = (self.cli if cli else None) or self.handler
        assert path is not None, f"{self.name} is served by its front end"
        fn = _loaded.get(path)
        if fn is None:
            module, attr = path.split(":")
            fn = _loaded[path] = getattr(importlib.import_module(module), attr)
        return fn

    def shape(self, result: Mapping[str, Any]) -> Any:
        """The rpc answer for the handler's ``result``."""
        if self.reply == "details":
            return result["details"]
        if self.reply == "text+details":
            return {"text": result["text"], **result["details"]}
        return result


_loaded: dict[str, Callable[..., Any]] = {}


# --- the params several commands share ---------------------------------------------------------

SCOPE_HELP = ("global: every project (user preferences, general knowledge); shared: this project, committed with it "
              "(setup, conventions, architecture); personal: this project on this machine only (local paths, "
              "workarounds)")
PATHS_HELP = "Files, directories or globs, relative to the cwd, as ~/..., or absolute"

SCOPE = Param("scope", "str", SCOPE_HELP, choices=tuple(SCOPES))
PATHS = Param("paths", "strs", PATHS_HELP, default=(), cli="--path")
PAGE = Param("page", "int", "Result page, from 1", default=1)
ID = Param("id", "str", "Memory id or unique prefix", required=True, default="", arg="id_value", cli="ID")
CAPTION = Param("caption", "text", "One-line summary of the fact", required=True, default="")
CONTENT = Param("content", "text", "The fact itself, with exact commands, names and values", required=True, default="")
USER_REQUESTED = Param("user_requested", "bool", "True only when the user explicitly asked to remember this",
                       default=False)

# Every request may carry these; the front end uses them, no handler takes them.
COMMON = (Param("cwd", "str", "The directory whose project is meant"),
          Param("session", "str", "The agent's session id (the actor of events)"),
          Param("progress_token", "str", "Receives progress notifications; cancel names it"))


COMMANDS: dict[str, Command] = {c.name: c for c in (
    Command("hello"),
    Command("session_start"),
    Command("prompt_section"),
    Command("strip_context_files", (
        Param("system_prompt", "str", "Pi's system prompt", required=True, default=""),
        Param("context_files", "files", "Pi's context files", required=True, default=()),
        Param("only", "strs", "Strip exactly these files (the set stored with the session's snapshot)"))),
    Command("path_notes", (
        Param("tool_name", "str", "The tool that ran", required=True, default=""),
        Param("input", "any", "The tool call's input", required=True),
        Param("shown", "strs", "Ids this session has already shown", required=True, default=()),
        Param("is_error", "bool", "The tool call failed"))),
    Command("recall", (
        Param("queries", "strs", "Search queries; several phrasings find more", default=()),
        PATHS,
        Param("ids", "strs", "Memory ids (or unique prefixes) to read in full", default=(), arg="id_values",
              cli="--id"),
        PAGE, SCOPE,
        Param("recent_paths", "strs", "Paths the session touched lately, most recent first", default=(),
              tool=False, cli=None)),
        handler="realmem.interface.tools:recall", cli="realmem.interface.commands:recall", slow=True, later=True,
        tool="realmem_recall", title="Recall memories", description=(
            "Search long-term memory (realmem). Call it before starting any work, with queries about the task and "
            "the paths you will touch. Results are ordered by path (memories about the given or recently touched "
            "paths first, project-wide next, other areas last), then by use, then by relevance, and are paginated. "
            "`paths` alone lists the memories attached to those paths; `ids` reads memories that were shown as "
            "captions.")),
    Command("remember", (
        CAPTION, CONTENT, SCOPE, PATHS, USER_REQUESTED,
        Param("source", "str", "Who asked: remember, add or import", default="remember", tool=False, cli=None)),
        handler="realmem.interface.tools:remember", cli="realmem.interface.commands:remember", slow=True,
        tool="realmem_remember", title="Remember",
        description=(
            "Store a new, important and durable fact in long-term memory (realmem): project setup, conventions, "
            "architecture decisions, commands that work, pitfalls and their fixes, user preferences. Not task "
            "status or anything easily re-derived. A fact that corrects an existing memory updates it. The memory "
            "gate decides whether to add, edit, merge or just reinforce.")),
    Command("status", handler="realmem.interface.tools:status", tool="realmem_status", title="Memory status",
            description=(
                "Show realmem's state: memory counts per store, queued candidates, worker and endpoint health, and "
                "git-ignore warnings for the shared store.")),
    Command("list", (PAGE, SCOPE), handler="realmem.interface.tools:listing", cli="realmem.interface.commands:listing",
            tool="realmem_list",
            title="List memories", description=(
                "List every memory, sorted by path, then by use. Large output: prefer realmem_recall with queries "
                "or paths, and use this only when asked to review all memories.")),
    Command("forget", (
        Param("ids", "strs", "Memory ids or unique prefixes", required=True, default=(), arg="id_values",
              min_items=1, cli="ID"),),
        handler="realmem.interface.tools:forget", tool="realmem_forget", title="Forget memories", description=(
            "Delete memories that are obsolete or wrong, by id (or unique id prefix). To correct a memory, prefer "
            "realmem_remember with the corrected fact.")),
    Command("show", (ID,), handler="realmem.interface.commands:show", cli="realmem.interface.commands:show_text"),
    Command("manage_list", (
        Param("query", "str", "Only memories whose caption, content or paths hold it", cli="QUERY"),
        Param("semantic", "bool", "Hybrid search instead of a substring filter", default=False)),
        handler="realmem.interface.commands:manage_list", slow=True, reply="details"),
    Command("edit", (
        ID, attrs.evolve(CAPTION, required=False, default=None), attrs.evolve(CONTENT, required=False, default=None),
        attrs.evolve(PATHS, default=None)),
        handler="realmem.interface.commands:edit"),
    Command("move", (ID, attrs.evolve(SCOPE, required=True, default="")), handler="realmem.interface.commands:move"),
    Command("approve", (ID,), handler="realmem.interface.commands:approve"),
    Command("apply_suggested_path", (ID, Param("path", "str", "The suggested path", required=True, default="")),
            handler="realmem.interface.commands:apply_suggested_path"),
    Command("settings_get", handler="realmem.interface.settings:show", on="config", reply="details"),
    Command("settings_set", (
        Param("key", "str", "The setting", required=True, default="", cli="KEY"),
        Param("value", "any", "Its value (a string is parsed as on the command line; null or \"\" unsets)",
              required=True, cli="VALUE")),
        on="config", cli="realmem.interface.settings:set_value"),
    Command("settings_models", (
        Param("endpoint", "str", "The endpoint whose models to list", required=True, default="",
              choices=("semif", "embedding", "rewriter"), cli="ENDPOINT"),),
        handler="realmem.interface.settings:models", on="config", slow=True, reply="details"),
    Command("settings_test", handler="realmem.interface.settings:connectivity", on="config", slow=True,
            reply="details"),
    Command("debug", (
        CAPTION, CONTENT, SCOPE, PATHS, USER_REQUESTED,
        Param("write", "bool", "Perform the write for real", default=False)),
        handler="realmem.interface.commands:debug", slow=True),
    Command("import_begin", (
        Param("files", "strs", "The context files to import (default: the project's)", default=(), cli="FILE"),
        Param("force", "bool", "Import again files already imported and unchanged", default=False)),
        handler="realmem.gate.importer:begin", cli="realmem.interface.commands:import_files", slow=True),
    Command("import_finish", handler="realmem.gate.importer:finish", slow=True),
    Command("check_paths", (Param("paths", "strs", "User-typed paths", required=True, default=(), arg="raw"),),
            handler="realmem.interface.commands:check_paths", reply="details"),
    Command("prune_paths", (Param("apply", "bool", "Apply the plan (else only show it)", required=True,
                                  default=False, cli=None),),
            handler="realmem.interface.commands:prune_paths", slow=True),
    Command("consolidate", (
        Param("stores", "strs", "Scopes to consolidate (default: every visible store)", default=(),
              choices=tuple(SCOPES), cli="SCOPE"),
        Param("paths", "bool", "Revise the memories' paths too", default=True, arg="revise_paths")),
        handler="realmem.interface.commands:consolidate", slow=True, progress=True),
    Command("gitignore_check", handler="realmem.interface.commands:gitignore_check", reply="details"),
    Command("gitignore_fix", handler="realmem.interface.commands:gitignore_fix", reply="text+details"),
    Command("embed", handler="realmem.interface.commands:embed", slow=True, progress=True),
    Command("reindex", handler="realmem.interface.commands:reindex", slow=True),
    Command("retry", handler="realmem.interface.commands:retry", slow=True, progress=True),
)}

TOOLS: dict[str, Command] = {c.tool: c for c in COMMANDS.values() if c.tool}
SLOW = frozenset(c.name for c in COMMANDS.values() if c.slow)
