"""Scriptable fake endpoints (System One judge, embeddings, chat; the model APIs of Gemini CLI
and Codex) on real loopback sockets.

Used in-process by tests and by hand: ``python -m realmem.fakes --semif --embeddings --chat``.
"""

from realmem.fakes.base import FakeServer, RecordedRequest, Reply, ScriptError, Stream
from realmem.fakes.chat import FakeChat, heuristic_reply
from realmem.fakes.embeddings import FakeEmbeddings, fake_embedding
from realmem.fakes.gemini import FakeGemini
from realmem.fakes.responses import FakeResponses
from realmem.fakes.systemone import FakeSystemOne, build_answer

__all__ = [
    "FakeChat", "FakeEmbeddings", "FakeGemini", "FakeResponses", "FakeServer", "FakeSystemOne", "RecordedRequest",
    "Reply", "ScriptError", "Stream",
    "build_answer", "fake_embedding", "heuristic_reply",
]
