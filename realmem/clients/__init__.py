"""HTTP clients for the three endpoints realmem talks to: System One judge, embeddings, chat.

The names load on first use (PEP 562): importing ``realmem.clients.errors`` must not pull in
httpx, which costs more start-up than the rest of a command like ``status``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "BRIDGE_MODEL": "chat", "ChatClient": "chat", "extract_json_object": "chat",
    "EmbeddingsClient": "embeddings",
    "EndpointError": "errors", "EndpointUnavailable": "errors", "NotConfigured": "errors",
    "RequestTooLarge": "errors",
    "AUTO": "models", "list_models": "models", "parse_models": "models", "pick_model": "models",
    "Answer": "systemone", "Answers": "systemone", "ChoiceAnswer": "systemone", "NoulAnswer": "systemone",
    "Question": "systemone", "ScoreAnswer": "systemone", "SystemOneClient": "systemone",
    "combine_choice": "systemone", "continuation_lines": "systemone", "parse_answer": "systemone", "shard_choice": "systemone",
}

if TYPE_CHECKING:
    from realmem.clients.chat import BRIDGE_MODEL, ChatClient, extract_json_object
    from realmem.clients.embeddings import EmbeddingsClient
    from realmem.clients.errors import EndpointError, EndpointUnavailable, NotConfigured, RequestTooLarge
    from realmem.clients.models import AUTO, list_models, parse_models, pick_model
    from realmem.clients.systemone import (
        Answer,
        Answers,
        ChoiceAnswer,
        NoulAnswer,
        Question,
        ScoreAnswer,
        SystemOneClient,
        combine_choice,
        continuation_lines,
        parse_answer,
        shard_choice,
    )

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'realmem.clients' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"realmem.clients.{module}"), name)
    globals()[name] = value
    return value
