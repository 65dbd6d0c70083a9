"""Fake OpenAI-compatible chat completions server standing in for the Edit/Merge rewriter.

Scripted replies are consumed in order, one per request.  Without a script (heuristic mode):
when any message mentions JSON, the reply is ``{"caption", "content"}`` built from the last
user message's ``Caption:`` / ``Content:`` lines (the last caption, all distinct contents
joined; a block ends at the next label, heading or upper-case line such as
``NEW FACT``), falling back to its first line and whole text; when the system message asks for
``{"facts": ...}`` (an import's split), each Markdown bullet or paragraph of the last user
message is one shared, project-wide fact; otherwise the last user message is echoed.  Prompts
are checked through ``.requests``.

Judge mode (``FakeChat(judge=a FakeSystemOne)``): a request whose system message is the chat
judge's (``realmem.clients.chatjudge.SYSTEM``) is answered with the judge JSON
``{"answers": {name: {"probabilities": {option: p}}}}`` from that fake's answer logic, the
same scripts and heuristic a test sets with ``s1.script``; a choice or score answer gives its
probabilities, a noul one ``{"true": p, "false": 1 - p}``.  With ``report_step`` (0.1) the
probabilities are rounded to that step the way chat models report theirs (0.9/0.1, 0.7/0.2/0.1,
0.6/0.4; see ``rounded``).  Other requests (the rewriter's) keep the scripted replies above.
"""

from __future__ import annotations

import json
import re
import time
from collections import deque
from typing import Any

from realmem.clients import chatjudge
from realmem.fakes.base import FakeServer, Reply, ScriptError, not_found
from realmem.fakes.systemone import FakeSystemOne

_CAPTION = re.compile(r"^\s*caption\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
# A content block runs until the next label, Markdown heading or upper-case section line.
_CONTENT = re.compile(r"^[ \t]*(?i:content)[ \t]*:[ \t]*(.*?)"
                      r"(?=^[ \t]*(?i:caption|content|paths?|id|scope)[ \t]*:"
                      r"|^[ \t]*#|^[ \t]*[A-Z][A-Z _-]{2,}:?[ \t]*$|\Z)",
                      re.MULTILINE | re.DOTALL)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def split_facts(text: str) -> list[dict[str, Any]]:
    """One fact per bullet or paragraph; headings and the ``File NAME:`` line are skipped."""
    blocks: list[list[str]] = []
    paragraph = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or re.fullmatch(r"File \S+:", stripped):
            paragraph = False
        elif _BULLET.match(line):
            blocks.append([_BULLET.sub("", line, count=1).strip()])
            paragraph = True  # an indented next line continues the bullet
        elif paragraph:
            blocks[-1].append(stripped)
        else:
            blocks.append([stripped])
            paragraph = True
    facts = []
    for block in blocks:
        content = " ".join(block)
        caption = content.rstrip(".")
        if len(caption) > 80:
            caption = caption[:79].rsplit(" ", 1)[0] + "…"
        facts.append({"caption": caption, "content": content, "paths": [], "scope": "shared"})
    return facts


def heuristic_reply(messages: list[dict[str, Any]]) -> str:
    """The unscripted reply described in the module docstring."""
    users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
    last = users[-1] if users else ""
    if any(m.get("role") == "system" and '{"facts"' in _text(m.get("content")) for m in messages):
        return json.dumps({"facts": split_facts(last)})
    if not any("json" in _text(m.get("content")).lower() for m in messages):
        return last
    captions = _CAPTION.findall(last)
    contents = list(dict.fromkeys(c.strip() for c in _CONTENT.findall(last) if c.strip()))
    first_line = next((line.strip() for line in last.splitlines() if line.strip()), "")
    caption = captions[-1] if captions else first_line[:80]
    return json.dumps({"caption": caption, "content": "\n\n".join(contents) or last.strip()})


def judge_question(asked: Any) -> dict[str, Any]:
    """The System One wire question behind one entry of the chat judge's QUESTIONS: the prompt
    names no type, so it is read from the options (true/false, levels "0".."n-1", else a choice)."""
    if not isinstance(asked, dict) or not isinstance(asked.get("options"), dict):
        raise ScriptError(f"a chat judge question needs options: {asked!r}")
    options, instructions = asked["options"], asked.get("question", "")
    if list(options) == ["true", "false"]:
        return {"type": "noul", "instructions": instructions}
    if list(options) == [str(i) for i in range(len(options))]:
        return {"type": "score", "instructions": instructions, "criteria": list(options.values())}
    return {"type": "choice", "instructions": instructions, "criteria": dict(options)}


def option_probabilities(answer: dict[str, Any]) -> dict[str, float]:
    """A System One answer as the chat judge's per-option probabilities."""
    if answer.get("type") == "noul":
        p = float(answer["noul"])
        return {"true": p, "false": 1.0 - p}
    return dict(answer["probabilities"])


def rounded(probs: dict[str, float], step: float) -> dict[str, float]:
    """``probs`` on a grid of ``step``, still summing to 1 (largest remainder; a tie goes to the
    likelier option, so 0.55/0.45 reads 0.6/0.4): a chat model's self-reported distribution."""
    units = round(1 / step)
    scaled = {k: round(p * units, 9) for k, p in probs.items()}  # 0.7 * 10 is 7.000000000000001
    whole = {k: int(v) for k, v in scaled.items()}
    by_remainder = sorted(probs, key=lambda k: (scaled[k] - whole[k], probs[k]), reverse=True)
    for k in by_remainder[:units - sum(whole.values())]:
        whole[k] += 1
    return {k: round(n * step, 6) for k, n in whole.items()}


def judge_json(answers: dict[str, dict[str, Any]], step: float | None = None) -> dict[str, Any]:
    """System One answers by question name as the chat judge's reply, rounded to ``step`` if given."""
    reply = {}
    for name, answer in answers.items():
        probs = option_probabilities(answer)
        reply[name] = {"probabilities": rounded(probs, step) if step else probs}
    return {"answers": reply}


def judge_reply(judge: FakeSystemOne, user: str, step: float | None = None) -> str:
    """The judge JSON for the chat judge's user message ``STATE\n...\n\nQUESTIONS\n{json}``."""
    head, sep, asked = user.rpartition("\n\nQUESTIONS\n")
    if not sep or not head.startswith("STATE\n"):
        raise ScriptError("a chat judge request holds STATE and QUESTIONS")
    state = head.removeprefix("STATE\n")
    answers = {name: judge.answer(name, state, judge_question(q)) for name, q in json.loads(asked).items()}
    return json.dumps(judge_json(answers, step))


class FakeChat(FakeServer):
    """Chat completions: GET /v1/models, POST /v1/chat/completions."""

    kind = "chat"

    def __init__(self, *, key: str = "", port: int = 0, heuristic: bool = True,
                 models: list[str] | None = None, any_model: bool = False,
                 judge: FakeSystemOne | None = None, report_step: float | None = None) -> None:
        super().__init__(key=key, port=port)
        self.judge = judge  # judge mode: see the module docstring
        self.report_step = report_step
        self.heuristic = heuristic
        self.models = list(models) if models is not None else ["fake-chat"]
        self.any_model = any_model  # like the Pi bridge, which answers whatever model is named
        self._replies: deque[str] = deque()

    def settable(self) -> set[str]:
        return super().settable() | {"heuristic", "models", "any_model", "report_step"}

    def script(self, payload: Any) -> None:
        """Queue replies: a string, a list of strings, or ``{"replies": [...]}``."""
        if isinstance(payload, dict):
            payload = payload.get("replies")
        if isinstance(payload, str):
            payload = [payload]
        if not isinstance(payload, list) or not all(isinstance(r, str) for r in payload):
            raise ScriptError("a chat script is a reply string or a list of them")
        with self._lock:
            self._replies.extend(payload)

    def _reset_script(self) -> None:
        self._replies.clear()

    def handle(self, method: str, path: str, body: Any) -> Reply:
        if method == "GET" and path == "/v1/models":
            return Reply(200, {"object": "list",
                               "data": [{"id": m, "object": "model", "owned_by": "realmem"} for m in self.models]})
        if method == "POST" and path == "/v1/chat/completions":
            messages = body.get("messages") if isinstance(body, dict) else None
            if not isinstance(body, dict) or not isinstance(body.get("model"), str):
                return _invalid("the request needs a model")
            if not isinstance(messages, list) or not messages or not all(
                    isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m for m in messages):
                return _invalid("messages must be a non-empty list of {role, content}")
            if not self.any_model and body["model"] not in self.models:
                return Reply(404, {"error": {"message": f"model {body['model']!r} not found",
                                             "type": "invalid_request_error"}})
            reply = self._judge_reply(messages)
            if reply is None:
                with self._lock:
                    reply = self._replies.popleft() if self._replies else None
            if reply is None:
                if not self.heuristic:
                    raise ScriptError("no scripted reply left")
                reply = heuristic_reply(messages)
            prompt = sum(len(_text(m.get("content")).split()) for m in messages)
            return Reply(200, {
                "id": f"chatcmpl-fake-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": len(reply.split()),
                          "total_tokens": prompt + len(reply.split())},
            })
        return not_found(path)

    def _judge_reply(self, messages: list[dict[str, Any]]) -> str | None:
        """The judge JSON in judge mode for the chat judge's request, else None."""
        if self.judge is None or _text(messages[0].get("content")) != chatjudge.SYSTEM:
            return None
        return judge_reply(self.judge, _text(messages[-1].get("content")), self.report_step)


def _invalid(message: str) -> Reply:
    return Reply(400, {"error": {"message": message, "type": "invalid_request_error"}})
