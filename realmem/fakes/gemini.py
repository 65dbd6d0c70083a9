"""Fake Gemini API (``generativelanguage`` v1beta) for Gemini CLI, which reaches it through
``GOOGLE_GEMINI_BASE_URL`` with a ``GEMINI_API_KEY`` (sent as ``x-goog-api-key``, so no bearer
check here).

``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` answers the next scripted turn
as one server-sent ``GenerateContentResponse``; ``:generateContent`` answers it as JSON and
``:countTokens`` counts words.  A tool call is a ``functionCall`` part; the tool's result
comes back in the next request as a ``functionResponse`` part.
"""

from __future__ import annotations

import json
from typing import Any

from realmem.fakes.agentmodel import FakeAgentModel, Turn
from realmem.fakes.base import Reply, Stream, not_found

PREFIX = "/v1beta/models/"


def _response(turn: Turn, model: str, words: int) -> dict[str, Any]:
    part = {"functionCall": {"name": turn.call, "args": turn.args or {}}} if turn.call else {"text": turn.text}
    return {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": words, "candidatesTokenCount": 1, "totalTokenCount": words + 1},
        "modelVersion": model,
    }


class FakeGemini(FakeAgentModel):
    kind = "gemini"

    def handle(self, method: str, path: str, body: Any) -> Reply:
        if method != "POST" or not path.startswith(PREFIX) or ":" not in path:
            return not_found(path)
        model, verb = path[len(PREFIX):].rsplit(":", 1)
        words = len(json.dumps((body or {}).get("contents", [])).split())
        if verb == "countTokens":
            return Reply(200, {"totalTokens": words})
        if verb == "generateContent":
            return Reply(200, _response(self.next_turn(), model, words))
        if verb == "streamGenerateContent":
            return Reply(200, Stream([(None, _response(self.next_turn(), model, words))]))
        return not_found(path)
