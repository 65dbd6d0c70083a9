"""HTTP clients for the three endpoints realmem talks to: System One judge, embeddings, chat."""

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
    parse_answer,
    shard_choice,
)

__all__ = [
    "AUTO", "BRIDGE_MODEL", "Answer", "Answers", "ChatClient", "ChoiceAnswer", "EmbeddingsClient",
    "EndpointError", "EndpointUnavailable", "NotConfigured", "NoulAnswer", "Question", "RequestTooLarge",
    "ScoreAnswer", "SystemOneClient", "combine_choice", "extract_json_object", "list_models",
    "parse_answer", "parse_models", "pick_model", "shard_choice",
]
