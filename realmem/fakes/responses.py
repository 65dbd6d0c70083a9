"""Fake OpenAI Responses API for Codex, the only wire protocol its model providers speak
(``wire_api = "responses"``; a ``[model_providers.x]`` table with ``base_url`` points Codex here).

``POST /v1/responses`` (always ``stream: true`` from Codex) answers the next scripted turn as
server-sent events: ``response.created``, one ``response.output_item.done`` carrying a
``function_call`` item (arguments as a JSON string) or an assistant ``message``, then
``response.completed`` with usage.  The tool's output comes back in the next request as a
``function_call_output`` input item.  ``GET /v1/models`` lists no models: Codex then keeps the
one its config names.
"""

from __future__ import annotations

import json
from typing import Any

from realmem.fakes.agentmodel import FakeAgentModel, Turn
from realmem.fakes.base import Reply, Stream, not_found


def _item(turn: Turn, n: int) -> dict[str, Any]:
    if turn.call:
        return {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": turn.call,
                "arguments": json.dumps(turn.args or {}), "status": "completed"}
    return {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": turn.text, "annotations": []}]}


class FakeResponses(FakeAgentModel):
    kind = "responses"

    def handle(self, method: str, path: str, body: Any) -> Reply:
        if method == "GET" and path == "/v1/models":
            return Reply(200, {"object": "list", "data": [], "models": []})
        if method != "POST" or path != "/v1/responses":
            return not_found(path)
        n = len(self.requests)
        rid = f"resp_{n}"
        usage = {"input_tokens": len(json.dumps(body).split()), "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0}}
        usage["total_tokens"] = usage["input_tokens"] + 1
        item = _item(self.next_turn(), n)
        return Reply(200, Stream([
            ("response.created", {"type": "response.created", "response": {"id": rid}}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": {"id": rid, "usage": usage}}),
        ]))
