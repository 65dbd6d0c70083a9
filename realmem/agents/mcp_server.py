"""`realmem mcp`: the realmem tools, prompt section and resource for any MCP client, over stdio.

Built on the official ``mcp`` SDK (``MCPServer``).  The five tools, their names, titles,
descriptions and input schemas, come from the command registry (``realmem.interface.registry``),
as the Pi tools do (extensions/realmem/tools.ts; a test keeps the two in step), and call the
same functions as the rpc child.  The project is the client's
first ``file://`` root (asked again after ``notifications/roots/list_changed``), or the
server's cwd when the client offers none.  Events name the
agent as actor: ``<client name>/<client version>`` from initialize, plus ``#<session>`` when
the client gives a session id, so ``realmem audit`` tells which agent wrote what.
"""

from __future__ import annotations

import inspect
import os
import threading
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import unquote, urlparse

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, NotificationParams, TextContent
from pydantic import Field

from realmem import __version__, errors, logs
from realmem.agents import sampling
from realmem.clients.chat import ChatModel
from realmem.interface import registry
from realmem.read import prompt
from realmem.interface.entry import Entry
from realmem.interface import session as sessions
from realmem.app import Realmem
from realmem.logs import get_logger

logger = get_logger("realmem.mcp")

SECTION_URI = "realmem://prompt-section"
T = TypeVar("T")

def actor(client_name: str | None, client_version: str | None, session: str | None) -> str:
    """The event actor for an agent: ``name/version#session`` (parts the client left out dropped)."""
    who = client_name or "mcp-client"
    if client_version:
        who += f"/{client_version}"
    return f"{who}#{session}" if session else who


def root_path(uri: str) -> Path | None:
    """A ``file://`` root URI as a directory path (other schemes name no local project)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return Path(unquote(parsed.path))


class Backend:
    """The realmem side of the server: one app per project, used by one thread at a time
    (an apsw connection is not for concurrent use; agents may call tools in parallel)."""

    def __init__(self, home: str | None, cwd: str | None = None) -> None:
        # Outside edits and pulls are noticed at once (``scan``); an app opened starts a session.
        self.entry = Entry(home, on_open=_session_start)
        self.cwd = Path(cwd or os.getcwd()).resolve()
        self.project: Path | None = None  # from the client's roots, once asked
        self.lock = threading.Lock()

    def run(self, project: Path, session: str | None, fn: Callable[[Realmem], T],
            chat_model: Callable[[Realmem], ChatModel] | None = None) -> T:
        """``fn`` on the project's app as ``session``; the entry follows the log after it
        (queueing the background work the tool's events call for) and names a storage failure."""
        with self.lock, self.entry.request() as request:
            app = request.app(project, session=session, scan=True)
            app.chat_model = chat_model(app) if chat_model else None  # this call's client: never a later call's
            try:
                return fn(app)
            finally:
                app.chat_model = None

    def close(self) -> None:
        with self.lock:
            self.entry.close()


def _session_start(app: Realmem) -> None:
    note = sessions.start(app)["notification"]  # as a Pi session starts: flags, and a worker runs
    if note:
        logger.info("mcp.session_start", notification=note)


class Server:
    """The MCP server's handlers over one Backend: the tools the registry declares, the prompt
    and the resource, and the client's roots naming the project."""

    def __init__(self, home: str | None = None, cwd: str | None = None) -> None:
        self.backend = Backend(home, cwd)
        # The SDK configures stdlib logging at its own level (INFO by default), which would put a
        # line per request, and httpx's per HTTP call, in the client's server log: use realmem's.
        self.mcp = MCPServer(name="realmem", version=__version__, instructions=prompt.INTRO,
                             log_level=logs.level_name())  # type: ignore[arg-type]
        # MCPServer has no public way to take a notification; its low-level server has (pinned by
        # test_mcp's roots test, so an SDK that moves it fails there).
        self.mcp._lowlevel_server.add_notification_handler("notifications/roots/list_changed", NotificationParams,
                                                           self.roots_changed)
        for command in registry.TOOLS.values():
            self.mcp.add_tool(self.tool(command), name=command.tool, title=command.title,
                              description=command.description)
        self.mcp.prompt(name="realmem", title="realmem memory section",
                        description="The <realmem> section: how to use realmem, the most-used memories and the "
                                    "paths with path notes. Put it in the system prompt.")(self.section_prompt)
        self.mcp.resource(SECTION_URI, name="realmem-section", title="realmem memory section", mime_type="text/plain",
                          description="The <realmem> system-prompt section for the client's project.")(
            self.section_resource)

    async def project_of(self, ctx: Context) -> Path:
        backend = self.backend
        if backend.project is None:
            backend.project = await _client_root(ctx) or backend.cwd
            logger.info("mcp.project", project=str(backend.project))
        return backend.project

    async def roots_changed(self, ctx: Any, params: NotificationParams) -> None:
        """The client opened another workspace: the next call asks for its roots again."""
        self.backend.project = None

    async def call(self, ctx: Context, tool: str, fn: Callable[[Realmem], dict[str, Any]]) -> CallToolResult:
        """The tool's text, or a tool error with the message the Pi adapter shows (returned,
        not raised: the SDK would prefix a raised error with "Error executing tool ...")."""
        project = await self.project_of(ctx)
        who = _actor_of(ctx)
        # The client's own model judges and rewrites when it offers sampling and no endpoint is set.
        model = (lambda app: sampling.SamplingChat(ctx, float(app.config["rewriter.timeout"]))) \
            if sampling.supported(ctx) else None
        try:
            out = await anyio.to_thread.run_sync(self.backend.run, project, who, fn, model)
        except Exception as exc:  # refused, bad argument, storage (``Entry.fault``) or a bug: one line, as rpc answers
            if errors.code_of(exc) == errors.INTERNAL:  # the traceback goes to stderr
                logger.exception("mcp.internal_error", tool=tool)
            return _result(errors.message_of(exc, tool), error=True)
        return _result(str(out["text"]))

    def tool(self, command: registry.Command) -> Callable[..., Awaitable[CallToolResult]]:
        """The tool's function for the SDK, its signature generated from the registry's params
        (the SDK builds the input schema from the signature)."""
        name = command.tool or command.name

        async def tool(ctx: Context, **given: Any) -> CallToolResult:
            arguments = command.arguments(given)
            return await self.call(ctx, name, lambda app: command.function()(app, **arguments))

        params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)]
        for param in command.tool_params:
            annotation, default = _annotation(param)
            params.append(inspect.Parameter(param.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                            default=default))
        tool.__name__ = name
        tool.__signature__ = inspect.Signature(params, return_annotation=CallToolResult)  # type: ignore[attr-defined]
        tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": CallToolResult}
        return tool

    async def section_prompt(self, ctx: Context) -> str:
        project = await self.project_of(ctx)
        return await anyio.to_thread.run_sync(self.backend.run, project, None, prompt.section)

    async def section_resource(self) -> str:
        # Static resources get no context: the project is the one the roots named, else the cwd.
        backend = self.backend
        return await anyio.to_thread.run_sync(backend.run, backend.project or backend.cwd, None, prompt.section)


def _annotation(param: registry.Param) -> tuple[Any, Any]:
    """A registry param as the pydantic annotation and default of a tool argument: the input
    schema the client sees (and checks the model's call against) comes from it."""
    kind: Any = {"strs": list[str], "int": int, "bool": bool, "str": str, "text": str}[param.type]
    if param.choices:
        kind = Literal[param.choices]
    limits = {"ge": 1} if param.type == "int" else {"min_length": param.min_items} if param.min_items else {}
    field = Field(description=param.help, **limits)
    if param.required:
        return Annotated[kind, field], inspect.Parameter.empty
    return Annotated[kind | None, field], None


def _result(text: str, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


async def _client_root(ctx: Context) -> Path | None:
    caps = ctx.client_capabilities
    if caps is None or caps.roots is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # roots are deprecated in the newest protocol, still what clients send
            result = await ctx.session.list_roots()
    except Exception as exc:  # a client that declares roots but fails to list them: use the cwd
        logger.warning("mcp.roots_failed", error=f"{type(exc).__name__}: {exc}")
        return None
    for root in result.roots:
        path = root_path(str(root.uri))
        if path is not None and path.is_dir():
            return path.resolve()
    return None


def _actor_of(ctx: Context) -> str:
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    meta = ctx.request_context.meta
    extra = meta.model_extra if meta is not None and hasattr(meta, "model_extra") else None
    session = None
    for key in ("sessionId", "session_id"):
        if extra and isinstance(extra.get(key), str):
            session = extra[key]
    headers = ctx.headers
    if session is None and headers:
        session = headers.get("mcp-session-id")
    session = session or os.environ.get("REALMEM_SESSION") or None
    return actor(info.name if info else None, info.version if info else None, session)


def serve(home: str | None = None, cwd: str | None = None) -> int:
    logs.configure()  # structlog to stderr: stdout carries the protocol only
    server = Server(home, cwd)
    try:
        server.mcp.run("stdio")
    finally:
        server.backend.close()
    return 0
