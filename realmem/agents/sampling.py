"""An MCP client's own model as realmem's chat model, through MCP sampling.

A client that declares the ``sampling`` capability can be asked ``sampling/createMessage``
from inside a tool call.  realmem then judges ``realmem_remember`` (when no System One is set)
and rewrites Edit/Merge with the model the agent already uses, as the Pi bridge does for Pi.
The gate runs in a worker thread of the server's event loop; each request goes back to the
loop with ``anyio.from_thread``.
"""

from __future__ import annotations

import functools
from typing import Any

import anyio
import anyio.from_thread
from mcp.server.mcpserver import Context
from mcp.types import SamplingMessage, TextContent

from realmem.clients.chat import ChatModel
from realmem.clients.errors import EndpointError, EndpointUnavailable

# The judge's JSON for a few neighbours fits well within this; a rewrite is shorter.
MAX_TOKENS = 4096


def supported(ctx: Context) -> bool:
    caps = ctx.client_capabilities
    return caps is not None and caps.sampling is not None


class SamplingChat(ChatModel):
    """Chat completions as ``sampling/createMessage`` requests to the client of one tool call."""

    def __init__(self, ctx: Context, timeout: float) -> None:
        self._ctx = ctx
        self._timeout = timeout

    def limited(self, seconds: float) -> SamplingChat:
        return SamplingChat(self._ctx, min(self._timeout, seconds))

    def completion(self, messages: list[dict[str, Any]], *, temperature: float = 0.0,
                   max_tokens: int | None = None) -> tuple[str, str, dict[str, float]]:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system") or None
        turns = [SamplingMessage(role=m["role"], content=TextContent(type="text", text=m["content"]))
                 for m in messages if m["role"] != "system"]
        ask = functools.partial(self._ctx.session.create_message, turns, max_tokens=max_tokens or MAX_TOKENS,
                                system_prompt=system, temperature=temperature,
                                related_request_id=self._ctx.request_id)

        async def call() -> Any:
            # A client may ask its user to approve the request: wait as long as for any chat model.
            with anyio.fail_after(self._timeout):
                return await ask()

        try:
            result = anyio.from_thread.run(call)
        except TimeoutError:
            raise EndpointUnavailable(f"the MCP client's sampling did not answer within {self._timeout:g} s") from None
        except Exception as exc:  # the client refused (declined by its user, or an error reply)
            raise EndpointError(f"the MCP client refused the sampling request ({exc})") from None
        content = result.content
        parts = content if isinstance(content, list) else [content]
        text = "".join(p.text for p in parts if isinstance(p, TextContent))
        if not text:
            raise EndpointError("the MCP client's sampling reply holds no text")
        return text, result.model or "mcp-sampling", {}
