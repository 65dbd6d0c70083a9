"""`realmem mcp`: the realmem tools, prompt section and resource for any MCP client, over stdio.

Built on the official ``mcp`` SDK (``MCPServer``).  The five tools carry the Pi tools' names,
parameters and descriptions (extensions/realmem/tools.ts; a test keeps the two in step) and
call the same functions as the rpc child (``realmem.interface.tools``).  The project is the client's
first ``file://`` root (asked again after ``notifications/roots/list_changed``), or the
server's cwd when the client offers none.  Events name the
agent as actor: ``<client name>/<client version>`` from initialize, plus ``#<session>`` when
the client gives a session id, so ``realmem audit`` tells which agent wrote what.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
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
from realmem.interface import tools
from realmem.read import prompt
from realmem.interface.entry import Entry
from realmem.interface import session as sessions
from realmem.app import Realmem
from realmem.logs import get_logger

logger = get_logger("realmem.mcp")

SECTION_URI = "realmem://prompt-section"
T = TypeVar("T")

Scope = Annotated[Literal["global", "shared", "personal"] | None, Field(description=(
    "global: every project (user preferences, general knowledge); shared: this project, committed with it "
    "(setup, conventions, architecture); personal: this project on this machine only (local paths, workarounds)"))]
Paths = Annotated[list[str] | None, Field(
    description="Files, directories or globs, relative to the cwd, as ~/..., or absolute")]
Page = Annotated[int | None, Field(ge=1, description="Result page, from 1")]

DESCRIPTIONS = {
    "realmem_recall": (
        "Search long-term memory (realmem). Call it before starting any work, with queries about the task and the "
        "paths you will touch. Results are ordered by path (memories about the given or recently touched paths "
        "first, project-wide next, other areas last), then by use, then by relevance, and are paginated. `paths` "
        "alone lists the memories attached to those paths; `ids` reads memories that were shown as captions."),
    "realmem_remember": (
        "Store a new, important and durable fact in long-term memory (realmem): project setup, conventions, "
        "architecture decisions, commands that work, pitfalls and their fixes, user preferences. Not task status "
        "or anything easily re-derived. A fact that corrects an existing memory updates it. The memory gate "
        "decides whether to add, edit, merge or just reinforce."),
    "realmem_status": (
        "Show realmem's state: memory counts per store, queued candidates, worker and endpoint health, and "
        "git-ignore warnings for the shared store."),
    "realmem_list": (
        "List every memory, sorted by path, then by use. Large output: prefer realmem_recall with queries or "
        "paths, and use this only when asked to review all memories."),
    "realmem_forget": (
        "Delete memories that are obsolete or wrong, by id (or unique id prefix). To correct a memory, prefer "
        "realmem_remember with the corrected fact."),
}
TITLES = {"realmem_recall": "Recall memories", "realmem_remember": "Remember", "realmem_status": "Memory status",
          "realmem_list": "List memories", "realmem_forget": "Forget memories"}


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


def build(home: str | None = None, cwd: str | None = None) -> tuple[MCPServer, Backend]:
    backend = Backend(home, cwd)
    # The SDK configures stdlib logging at its own level (INFO by default), which would put a
    # line per request, and httpx's per HTTP call, in the client's server log: use realmem's.
    server = MCPServer(name="realmem", version=__version__, instructions=prompt.INTRO,
                       log_level=logs.level_name())  # type: ignore[arg-type]

    async def project_of(ctx: Context) -> Path:
        if backend.project is None:
            backend.project = await _client_root(ctx) or backend.cwd
            logger.info("mcp.project", project=str(backend.project))
        return backend.project

    async def roots_changed(ctx: Any, params: NotificationParams) -> None:
        """The client opened another workspace: the next call asks for its roots again."""
        backend.project = None

    # MCPServer has no public way to take a notification; its low-level server has (pinned by
    # test_mcp's roots test, so an SDK that moves it fails there).
    server._lowlevel_server.add_notification_handler("notifications/roots/list_changed", NotificationParams,
                                                     roots_changed)

    async def call(ctx: Context, tool: str, fn: Callable[[Realmem], dict[str, Any]]) -> CallToolResult:
        """The tool's text, or a tool error with the message the Pi adapter shows (returned,
        not raised: the SDK would prefix a raised error with "Error executing tool ...")."""
        project = await project_of(ctx)
        who = _actor_of(ctx)
        # The client's own model judges and rewrites when it offers sampling and no endpoint is set.
        model = (lambda app: sampling.SamplingChat(ctx, float(app.config["rewriter.timeout"]))) \
            if sampling.supported(ctx) else None
        try:
            out = await anyio.to_thread.run_sync(backend.run, project, who, fn, model)
        except Exception as exc:  # refused, bad argument, storage (``Entry.fault``) or a bug: one line, as rpc answers
            if errors.code_of(exc) == errors.INTERNAL:  # the traceback goes to stderr
                logger.exception("mcp.internal_error", tool=tool)
            return _result(errors.message_of(exc, tool), error=True)
        return _result(str(out["text"]))

    @server.tool(name="realmem_recall", title=TITLES["realmem_recall"], description=DESCRIPTIONS["realmem_recall"])
    async def realmem_recall(
        ctx: Context,
        queries: Annotated[list[str] | None, Field(description="Search queries; several phrasings find more")] = None,
        paths: Paths = None,
        ids: Annotated[list[str] | None, Field(description="Memory ids (or unique prefixes) to read in full")] = None,
        page: Page = None,
        scope: Scope = None,
    ) -> CallToolResult:
        return await call(ctx, "realmem_recall", lambda app: tools.recall(
            app, queries=queries or [], paths=paths or [], id_values=ids or [], page=page or 1, scope=scope))

    @server.tool(name="realmem_remember", title=TITLES["realmem_remember"],
                 description=DESCRIPTIONS["realmem_remember"])
    async def realmem_remember(
        ctx: Context,
        caption: Annotated[str, Field(description="One-line summary of the fact")],
        content: Annotated[str, Field(description="The fact itself, with exact commands, names and values")],
        scope: Scope = None,
        paths: Paths = None,
        user_requested: Annotated[bool | None, Field(
            description="True only when the user explicitly asked to remember this")] = None,
    ) -> CallToolResult:
        return await call(ctx, "realmem_remember", lambda app: tools.remember(
            app, caption=caption, content=content, scope=scope, paths=paths or [],
            user_requested=bool(user_requested)))

    @server.tool(name="realmem_status", title=TITLES["realmem_status"], description=DESCRIPTIONS["realmem_status"])
    async def realmem_status(ctx: Context) -> CallToolResult:
        return await call(ctx, "realmem_status", tools.status)

    @server.tool(name="realmem_list", title=TITLES["realmem_list"], description=DESCRIPTIONS["realmem_list"])
    async def realmem_list(ctx: Context, page: Page = None, scope: Scope = None) -> CallToolResult:
        return await call(ctx, "realmem_list", lambda app: tools.listing(app, page=page or 1, scope=scope))

    @server.tool(name="realmem_forget", title=TITLES["realmem_forget"], description=DESCRIPTIONS["realmem_forget"])
    async def realmem_forget(
        ctx: Context,
        ids: Annotated[list[str], Field(min_length=1, description="Memory ids or unique prefixes")],
    ) -> CallToolResult:
        return await call(ctx, "realmem_forget", lambda app: tools.forget(app, ids))

    @server.prompt(name="realmem", title="realmem memory section",
                   description="The <realmem> section: how to use realmem, the most-used memories and the paths "
                               "with path notes. Put it in the system prompt.")
    async def realmem_prompt(ctx: Context) -> str:
        project = await project_of(ctx)
        return await anyio.to_thread.run_sync(backend.run, project, None, prompt.section)

    @server.resource(SECTION_URI, name="realmem-section", title="realmem memory section", mime_type="text/plain",
                     description="The <realmem> system-prompt section for the client's project.")
    async def realmem_resource() -> str:
        # Static resources get no context: the project is the one the roots named, else the cwd.
        return await anyio.to_thread.run_sync(backend.run, backend.project or backend.cwd, None, prompt.section)

    return server, backend


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
    server, backend = build(home, cwd)
    try:
        server.run("stdio")
    finally:
        backend.close()
    return 0
