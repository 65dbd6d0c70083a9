"""An MCP client session (the official SDK over real stdio) against `python -m realmem.interface.cli mcp`."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client

CLIENT = types.Implementation(name="test-agent", version="1.2.3")


Sampler = Callable[[types.CreateMessageRequestParams], Awaitable[types.CreateMessageResult]]


def run_client(env: dict[str, str], cwd: Path, body: Callable[[ClientSession], Awaitable[Any]], *,
               roots: list[Path] | None = None, errlog: Path, command: list[str] | None = None,
               sampling: Sampler | None = None) -> Any:
    """Start the server (``command``, by default this Python's), initialize a session
    (offering ``roots`` when given, and sampling by ``sampling`` when given), run ``body``."""
    exe, *args = command or [sys.executable, "-m", "realmem.interface.cli", "mcp"]
    params = StdioServerParameters(command=exe, args=args, env=env, cwd=str(cwd))

    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=p.as_uri(), name=p.name) for p in roots or []])

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        assert sampling is not None
        return await sampling(params)

    async def main() -> Any:
        with open(errlog, "a", encoding="utf-8") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write, client_info=CLIENT,
                                         list_roots_callback=list_roots if roots is not None else None,
                                         sampling_callback=sample if sampling is not None else None) as s:
                    await s.initialize()
                    return await body(s)

    return anyio.run(main)


def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    return result.content[0].text
