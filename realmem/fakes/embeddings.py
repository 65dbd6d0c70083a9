"""Fake OpenAI-compatible embeddings server with deterministic, similarity-preserving vectors.

A text's vector is a signed hashed bag of its word tokens (weight 1) and character trigrams
(weight 0.5), L2-normalised: texts sharing words or spellings get high cosine, so neighbour
search behaves plausibly without a model.  Exact input strings can be scripted to any vector.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from typing import Any

from realmem.fakes.base import FakeServer, Reply, ScriptError, not_found

_WORD = re.compile(r"\w+", re.UNICODE)


# Memoized: a bench store's 100k texts share a small vocabulary of words and trigrams, and
# hashing each feature again was most of the time ``bench`` spent building its cache.
@functools.lru_cache(maxsize=1 << 16)
def _slot(feature: str, dims: int) -> tuple[int, bool]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest[:4], "little") % dims, bool(digest[4] & 1)


def fake_embedding(text: str, dims: int = 64) -> list[float]:
    """The fake's vector for ``text`` (public so tests can compute expectations)."""
    vector = [0.0] * dims
    lowered = text.lower()
    features = [(w, 1.0) for w in _WORD.findall(lowered)]
    padded = f"  {lowered} "
    features += [(padded[i:i + 3], 0.5) for i in range(len(padded) - 2)]
    for feature, weight in features:
        index, positive = _slot(feature, dims)
        vector[index] += weight if positive else -weight
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:
        vector[0] = 1.0
        return vector
    return [x / norm for x in vector]


class FakeEmbeddings(FakeServer):
    """Embeddings: GET /v1/models, POST /v1/embeddings."""

    kind = "embeddings"

    def __init__(self, *, key: str = "", port: int = 0, models: list[str] | None = None, dims: int = 64,
                 reverse: bool = False) -> None:
        super().__init__(key=key, port=port)
        self.models = list(models) if models is not None else ["fake-embed"]
        self.dims = dims
        self.reverse = reverse  # answer data items in reverse order, to prove clients sort by index
        self._overrides: dict[str, list[float]] = {}
        # Dimensions of the next replies of a misbehaving endpoint (also ``configure(odd_dims=[..])``
        # over /_control/configure for a fake in another process).
        self.odd_dims: list[int] = []

    def odd_next(self, dims: int, n: int = 1) -> None:
        """Answer the next ``n`` embeddings requests with ``dims``-dimensional vectors, as an
        endpoint does mid-deploy or behind a misrouted load balancer."""
        with self._lock:
            self.odd_dims.extend([dims] * n)

    def settable(self) -> set[str]:
        return super().settable() | {"models", "dims", "reverse", "odd_dims"}

    def script(self, payload: Any) -> None:
        """``{exact input string: vector}``: that input always gets that vector."""
        if not isinstance(payload, dict):
            raise ScriptError("an embeddings script is {input text: [numbers]}")
        with self._lock:
            for text, vector in payload.items():
                if not isinstance(vector, list) or not all(isinstance(x, int | float) for x in vector):
                    raise ScriptError(f"vector for {text!r} must be a list of numbers")
                self._overrides[text] = [float(x) for x in vector]

    def _reset_script(self) -> None:
        self._overrides.clear()
        self.odd_dims = []

    def handle(self, method: str, path: str, body: Any) -> Reply:
        if method == "GET" and path == "/v1/models":
            return Reply(200, {"object": "list",
                               "data": [{"id": m, "object": "model", "owned_by": "realmem"} for m in self.models]})
        if method == "POST" and path == "/v1/embeddings":
            if not isinstance(body, dict) or not isinstance(body.get("model"), str):
                return _invalid("the request needs a model")
            if body["model"] not in self.models:
                return Reply(404, {"error": {"message": f"model {body['model']!r} not found",
                                             "type": "invalid_request_error"}})
            inputs = body.get("input")
            if isinstance(inputs, str):
                inputs = [inputs]
            if not isinstance(inputs, list) or not inputs or not all(isinstance(t, str) for t in inputs):
                return _invalid("input must be a string or a non-empty list of strings")
            with self._lock:
                dims = self.odd_dims.pop(0) if self.odd_dims else self.dims
                vectors = [self._overrides.get(t) or fake_embedding(t, dims) for t in inputs]
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
            if self.reverse:
                data.reverse()
            tokens = sum(len(t.split()) for t in inputs)
            return Reply(200, {"object": "list", "data": data, "model": body["model"],
                               "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
        return not_found(path)


def _invalid(message: str) -> Reply:
    return Reply(400, {"error": {"message": message, "type": "invalid_request_error"}})
