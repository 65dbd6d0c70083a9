"""Client for an OpenAI-compatible embeddings endpoint.

Candidates are embedded as documents and recall queries as queries, each with its configured
prefix (models such as e5 or nomic need them).  ``fingerprint`` names the embedding space
(endpoint + model + dimensions): the embeddings cache is keyed by it, so changing any of the
three invalidates cached vectors.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from realmem.clients.base import ModelClient
from realmem.clients.errors import EndpointError
from realmem.config import Config
from realmem.frontend import hint
from realmem.words import count
from realmem.logs import get_logger

log = get_logger(__name__)

BATCH_SIZE = 64
_PROBE_TEXT = "probe"


class EmbeddingsClient(ModelClient):
    """Embeds texts in batches; learns the vector dimensions from the first response."""

    endpoint_name = "embedding"
    settings_prefix = "embedding"

    def __init__(self, url: str, key: str = "", model: str = "", timeout: float = 30.0,
                 query_prefix: str = "", document_prefix: str = "", batch_size: int = BATCH_SIZE,
                 key_advice: str = "") -> None:
        super().__init__(url, key, model, timeout, key_advice)
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.query_prefix = query_prefix or ""
        self.document_prefix = document_prefix or ""
        self.batch_size = int(batch_size)
        self._dimensions: int | None = None

    @classmethod
    def from_config(cls, cfg: Config) -> EmbeddingsClient:
        return cls(url=str(cfg.get("embedding.url") or ""), key=cfg.secret("embedding.key"),
                   model=str(cfg.get("embedding.model") or ""),
                   timeout=float(cfg.get("embedding.timeout")),
                   query_prefix=str(cfg.get("embedding.queryPrefix") or ""),
                   document_prefix=str(cfg.get("embedding.documentPrefix") or ""),
                   key_advice=cfg.key_advice("embedding.key"))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in input order, with the document prefix applied."""
        return self._embed([self.document_prefix + t for t in texts])

    def embed_query(self, text: str) -> list[float]:
        """The vector of a recall query, with the query prefix applied."""
        return self._embed([self.query_prefix + text])[0]

    @property
    def dimensions(self) -> int:
        """Vector length; embeds one word to learn it when no response has been seen yet."""
        dimensions = self._dimensions
        if dimensions is None:
            dimensions = len(self._embed([_PROBE_TEXT])[0])
        return dimensions

    def redetect_dimensions(self) -> int:
        """Forget the learned vector length and ask the endpoint again."""
        self._dimensions = None
        return self.dimensions

    def fingerprint(self) -> str:
        """sha256 of endpoint URL, model and dimensions: the identity of the embedding space."""
        identity = f"{self.url}\n{self.model}\n{self.dimensions}"
        return hashlib.sha256(identity.encode("utf-8")).hexdigest()

    def _embed(self, inputs: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        if not inputs:
            return vectors
        model = self.model
        for start in range(0, len(inputs), self.batch_size):
            batch = inputs[start:start + self.batch_size]
            reply = self._endpoint.post("/v1/embeddings", {"model": model, "input": batch})
            vectors.extend(self._parse(reply, len(batch)))
        return vectors

    def _parse(self, reply: Any, expected: int) -> list[list[float]]:
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else "no"
            raise EndpointError(f"embedding reply has {count(got, 'vector')} for {count(expected, 'input')} ({self.url})")
        try:
            ordered = [item for _, item in sorted(
                enumerate(data), key=lambda pair: int(pair[1].get("index", pair[0])))]
            return [self._vector(item.get("embedding")) for item in ordered]
        except (AttributeError, TypeError, ValueError) as exc:
            raise EndpointError(f"embedding reply has malformed data items ({self.url})") from exc

    def _vector(self, value: Any) -> list[float]:
        if (not isinstance(value, list) or not value
                or not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
                           for x in value)):
            raise EndpointError(f"embedding reply holds a malformed vector ({self.url})")
        if self._dimensions is None:
            self._dimensions = len(value)
            log.debug("embeddings.dimensions", url=self.url, dimensions=self._dimensions)
        elif len(value) != self._dimensions:
            learned, self._dimensions = self._dimensions, None  # the next request learns them again
            raise EndpointError(f"embedding dimensions changed from {learned} to {len(value)} "
                                f"({self.url}); run {hint('reindex')} after changing the model")
        return [float(x) for x in value]
