"""The scripted model behind a real coding agent (Gemini CLI, Codex) in end-to-end tests.

A script is the model's turns, consumed one per model request: ``{"call": TOOL, "args": {...}}``
asks the agent to run one of its tools, ``{"text": "..."}`` is a final answer.  Each
subclass speaks one wire protocol (``realmem.fakes.gemini``, ``realmem.fakes.responses``);
what the agent sent, the context realmem's hooks added included, is in ``.requests``.  A
request with no turn left gets the text ``done``: agents also ask the model on their own
(titles, summaries), and those must not fail the run.
"""

from __future__ import annotations

from collections import deque
from typing import Any, NamedTuple

from realmem.fakes.base import FakeServer, ScriptError

DONE = "done"


class Turn(NamedTuple):
    text: str | None = None
    call: str | None = None
    args: dict[str, Any] | None = None


class FakeAgentModel(FakeServer):
    """Scripting shared by the agent model fakes; ``handle`` is the subclass's protocol."""

    def __init__(self, *, key: str = "", port: int = 0) -> None:
        super().__init__(key=key, port=port)
        self._turns: deque[Turn] = deque()

    def script(self, payload: Any) -> None:
        """Queue turns: a list of ``{"call", "args"}`` / ``{"text"}``, or ``{"turns": [...]}``."""
        if isinstance(payload, dict):
            payload = payload.get("turns")
        if not isinstance(payload, list):
            raise ScriptError("an agent model script is a list of turns")
        turns = []
        for t in payload:
            if isinstance(t, dict) and isinstance(t.get("text"), str):
                turns.append(Turn(text=t["text"]))
            elif isinstance(t, dict) and isinstance(t.get("call"), str) and isinstance(t.get("args", {}), dict):
                turns.append(Turn(call=t["call"], args=t.get("args", {})))
            else:
                raise ScriptError(f"a turn is {{'text'}} or {{'call', 'args'}}, not {t!r}")
        with self._lock:
            self._turns.extend(turns)

    def _reset_script(self) -> None:
        self._turns.clear()

    def next_turn(self) -> Turn:
        with self._lock:
            return self._turns.popleft() if self._turns else Turn(text=DONE)
