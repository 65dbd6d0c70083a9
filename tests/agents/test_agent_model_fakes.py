"""The fake model APIs the real-client tests drive Gemini CLI and Codex with
(tests/agents/test_real_clients.py), checked on their own so a broken fake shows here, in
every run, and not as a client that hangs or gives up.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from typing import Any

import pytest

from realmem.fakes import FakeGemini, FakeResponses, ScriptError


def post(url: str, body: Any) -> tuple[str, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.headers["Content-Type"], r.read()


def events(raw: bytes) -> list[tuple[str | None, Any]]:
    """Server-sent events as (event name, JSON data)."""
    out = []
    for block in raw.decode().split("\n\n"):
        if not block:
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        out.append((fields.get("event"), json.loads(fields["data"])))
    return out


def test_gemini_streams_each_turn_as_one_generate_content_response() -> None:
    with FakeGemini() as fake:
        fake.script({"turns": [{"call": "read_file", "args": {"file_path": "a.py"}}, {"text": "fine"}]})
        url = f"{fake.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        kind, raw = post(url, {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
        assert kind == "text/event-stream"
        [(name, chunk)] = events(raw)
        assert name is None
        assert chunk["candidates"][0]["content"]["parts"] == [{"functionCall": {"name": "read_file",
                                                                               "args": {"file_path": "a.py"}}}]
        _, raw = post(url.replace(":streamGenerateContent?alt=sse", ":generateContent"), {"contents": []})
        assert json.loads(raw)["candidates"][0]["content"]["parts"] == [{"text": "fine"}]
        _, raw = post(url, {"contents": []})  # nothing scripted left
        assert events(raw)[0][1]["candidates"][0]["content"]["parts"] == [{"text": "done"}]
        assert fake.requests[0].path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"


def test_responses_streams_created_item_completed() -> None:
    with FakeResponses() as fake:
        fake.script([{"call": "exec_command", "args": {"cmd": "cat a.py"}}, {"text": "fine"}])
        _, raw = post(f"{fake.url}/v1/responses", {"model": "m", "stream": True, "input": []})
        names = [n for n, _ in events(raw)]
        assert names == ["response.created", "response.output_item.done", "response.completed"]
        assert all(data["type"] == n for n, data in events(raw))
        item = events(raw)[1][1]["item"]
        assert (item["type"], item["name"], json.loads(item["arguments"])) == ("function_call", "exec_command",
                                                                               {"cmd": "cat a.py"})
        _, raw = post(f"{fake.url}/v1/responses", {"model": "m", "stream": True, "input": []})
        assert events(raw)[1][1]["item"]["content"][0]["text"] == "fine"


def test_a_turn_is_a_text_or_a_call() -> None:
    with pytest.raises(ScriptError):
        FakeGemini().script([{"args": {}}])


def test_python_m_realmem_fakes_serves_them_for_a_client_started_by_hand() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "realmem.fakes", "--gemini", "--responses", "--watch-stdin"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        lines = [proc.stdout.readline().split() for _ in range(3)]
        assert [line[0] for line in lines] == ["gemini", "responses", "ready"]
        url = lines[1][1]
        post(f"{url}/_control/script", [{"text": "by hand"}])
        _, raw = post(f"{url}/v1/responses", {"model": "m", "stream": True, "input": []})
        assert events(raw)[1][1]["item"]["content"][0]["text"] == "by hand"
        proc.stdin.close()  # --watch-stdin: the parent going away stops the fakes
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
