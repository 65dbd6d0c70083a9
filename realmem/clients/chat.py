"""Client for the chat model (the Edit/Merge rewriter, and the judge when no System One is
set): OpenAI-compatible chat completions.

By default the chat model is the Pi model bridge the adapter serves on loopback (it forwards to
whatever model Pi is using, so the model name sent is a placeholder); ``rewriter.url`` points
it somewhere else instead.  ``ChatModel`` is what the rewriter and the chat judge need of any
chat model, so an MCP client's sampling can stand in for the HTTP endpoint.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from realmem.clients import bridge
from realmem.clients.base import ModelClient
from realmem.clients.errors import EndpointError
from realmem.config import Config

if TYPE_CHECKING:
    from realmem.app import Realmem

# The bridge answers with Pi's current model whatever name is sent.
BRIDGE_MODEL = "pi"

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in a model reply, inside ```json fences or in surrounding prose."""
    decoder = json.JSONDecoder()
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for chunk in candidates:
        for match in re.finditer(r"\{", chunk):
            try:
                value, _ = decoder.raw_decode(chunk, match.start())
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    raise EndpointError(f"the rewriter's reply holds no JSON object: {text[:200]!r}")


def _content_text(content: Any) -> str | None:
    """Message content as text; some servers send a list of typed parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "".join(parts) if parts else None
    return None


class ChatModel:
    """A chat model as the rewriter and the chat judge use it: ``completion`` is the one call a
    kind of model implements; the rest is built on it."""

    configured = True

    def completion(self, messages: list[dict[str, Any]], *, temperature: float = 0.0,
                   max_tokens: int | None = None) -> tuple[str, str, dict[str, float]]:
        """(text, answering model, numeric usage): the judge records who answered and the cost."""
        raise NotImplementedError

    def complete(self, messages: list[dict[str, Any]], *, temperature: float = 0.0,
                 max_tokens: int | None = None) -> str:
        """The reply's text."""
        return self.completion(messages, temperature=temperature, max_tokens=max_tokens)[0]

    def complete_json(self, messages: list[dict[str, Any]], *, temperature: float = 0.0,
                      max_tokens: int | None = None) -> dict[str, Any]:
        """``complete`` then the first JSON object of the reply; EndpointError if there is none."""
        return extract_json_object(self.complete(messages, temperature=temperature, max_tokens=max_tokens))

    def limited(self, seconds: float) -> ChatModel:
        """This model, waiting at most ``seconds`` for a reply: a recall cannot wait as long as a
        remember in the background can."""
        return self

    def close(self) -> None:
        pass


class ChatClient(ModelClient, ChatModel):
    """Sends chat completion requests and returns the assistant's text."""

    endpoint_name = "rewriter"
    settings_prefix = "rewriter"

    def __init__(self, url: str, key: str = "", model: str = "", timeout: float = 60.0, key_advice: str = "") -> None:
        super().__init__(url, key, model, timeout, key_advice)

    @classmethod
    def from_config(cls, cfg: Config, bridge: tuple[str, str] | None = None) -> ChatClient:
        """The configured rewriter, else the Pi bridge ``(url, token)``, else an unconfigured client."""
        url = str(cfg.get("rewriter.url") or "")
        timeout = float(cfg.get("rewriter.timeout"))
        if not url and bridge is not None:
            bridge_url, token = bridge
            return cls(url=bridge_url, key=token, model=BRIDGE_MODEL, timeout=timeout,
                       key_advice="the Pi model bridge refused realmem's token; restart Pi (or set rewriter.url)")
        return cls(url=url, key=cfg.secret("rewriter.key"), model=str(cfg.get("rewriter.model") or ""),
                   timeout=timeout, key_advice=cfg.key_advice("rewriter.key"))

    def limited(self, seconds: float) -> ChatClient:
        # Each call builds its own client (chat_model), so the cap stays with this call.
        self._endpoint.timeout = min(self._endpoint.timeout, seconds)
        return self

    def completion(self, messages: list[dict[str, Any]], *, temperature: float = 0.0,
                   max_tokens: int | None = None) -> tuple[str, str, dict[str, float]]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": temperature}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        reply = self._endpoint.post("/v1/chat/completions", body)
        try:
            text = _content_text(reply["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError) as exc:
            raise EndpointError(f"the {self.endpoint_name}'s reply has no choices[0].message ({self.url})") from exc
        if text is None:
            raise EndpointError(f"the {self.endpoint_name}'s reply has no text content ({self.url})")
        model = reply.get("model") if isinstance(reply.get("model"), str) else self.model
        raw_usage = reply.get("usage")
        usage = {k: float(v) for k, v in raw_usage.items()
                 if isinstance(v, int | float) and not isinstance(v, bool)} if isinstance(raw_usage, dict) else {}
        return text, model, usage


def chat_model(cfg: Config, own: ChatModel | None = None) -> ChatModel:
    """rewriter.url, else a front end's own model (``own``: MCP sampling), else the Pi bridge."""
    if own is not None and not cfg["rewriter.url"]:
        return own
    return ChatClient.from_config(cfg, bridge.live(cfg.home))


def chat_client(app: Realmem) -> ChatModel:
    """The chat model for this call of ``app``: rewriter.url, else the front end's own model (MCP
    sampling), else the Pi model bridge.  Here, below the use cases, so recall reaches it too."""
    return chat_model(app.config, app.chat_model)
