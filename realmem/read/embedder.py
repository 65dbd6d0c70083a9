"""The edge between memories and the embeddings endpoint: cache, space and vector index.

Vectors are cached by sha256(caption + content) and the embedding-space fingerprint, so a
memory is embedded once per space, and replay or reindex never call the service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from realmem.storage import db
from realmem.clients.embeddings import EmbeddingsClient
from realmem.clients.local_embedder import LocalEmbedder
from realmem.clients.errors import EndpointError, EndpointUnavailable
from realmem.events.types import Key
from realmem.projections import index, queries, tables
from realmem.logs import get_logger

if TYPE_CHECKING:
    from realmem.app import Realmem

logger = get_logger("realmem.read.embedder")


_clients: dict[tuple, "EmbeddingsClient | LocalEmbedder"] = {}


def client(app: "Realmem") -> "EmbeddingsClient | LocalEmbedder | None":
    """The configured endpoint's client, else the bundled local model (``embedding.local``),
    reused while the settings stay the same, so the dimension probe, the model lookup and the
    model's loading happen once per process, not once per query."""
    cfg = app.config
    if not cfg["embedding.url"]:
        local = cfg["embedding.local"]
        if local == "off":
            return None
        c = _clients.get(("local", local))
        if c is None:
            c = _clients[("local", local)] = LocalEmbedder(local)
        return c
    sig = tuple(str(cfg[k]) for k in ("embedding.url", "embedding.model", "embedding.queryPrefix",
                                      "embedding.documentPrefix", "embedding.timeout")) + (cfg.secret("embedding.key"),)
    c = _clients.get(sig)
    if c is None:
        c = _clients[sig] = EmbeddingsClient.from_config(cfg)
    return c


def document_text(caption: str, content: str) -> str:
    return f"{caption}\n\n{content}"


def ensure_space(app: "Realmem", c: EmbeddingsClient) -> str:
    """Activate the client's embedding space; a new space clears the cache and index, so it
    must be confirmed first (``_confirm``): one odd reply never costs the cache."""
    fp = c.fingerprint()
    active = index.active_fingerprint(app.conn)
    if active == fp and index.vec_dims(app.conn) == c.dimensions:
        return fp
    if active is not None:
        fp = _confirm(c, active)
        if fp == active:
            return fp
    with db.transaction(app.conn):
        if index.set_space(app.conn, fp, c.dimensions):
            logger.info("embedding space changed; cache cleared", dims=c.dimensions)
    return fp


def _confirm(c: EmbeddingsClient, active: str) -> str:
    """The space the endpoint really answers in, asked twice: two consistent replies confirm a
    change; a second reply back in the active space shows the first was the odd one.  Replies
    that disagree with both are an endpoint error (the caller falls back to BM25)."""
    first = c.dimensions
    second = c.redetect_dimensions()
    if second == first or c.fingerprint() == active:
        return c.fingerprint()
    raise EndpointError(f"the embeddings endpoint answered {first} then {second} dimensions; "
                        "keeping the cached vectors until it answers consistently")


def embed_query(app: "Realmem", text: str) -> list[float] | None:
    """The query vector, or None when no embedder is configured or it cannot answer now."""
    c = client(app)
    if c is None:
        return None
    try:
        ensure_space(app, c)
        return c.embed_query(text)
    except (EndpointUnavailable, EndpointError) as exc:
        logger.warning("embedder unavailable for query; BM25 only", error=str(exc))
        return None


def embed_document(app: "Realmem", caption: str, content: str, content_hash: str) -> list[float] | None:
    """A candidate's document vector (cached).  Raises EndpointUnavailable so the gate can
    tell "embedder down" from "not configured" (None)."""
    c = client(app)
    if c is None:
        return None
    fp = ensure_space(app, c)
    cached = index.cache_get(app.conn, content_hash, fp)
    if cached is not None:
        return index.unpack(cached)
    vec = c.embed_documents([document_text(caption, content)])[0]
    with db.transaction(app.conn):
        index.cache_put(app.conn, content_hash, fp, vec)
    return vec


def missing(app: "Realmem") -> list[tuple[str, str]]:
    """(store, id) of the memories whose embedding is not cached in the active space."""
    return queries.unembedded(app.conn, index.active_fingerprint(app.conn) or "")


def embed_missing(app: "Realmem", *, batch: int = 64, progress=None) -> int:
    """Embed every memory lacking a cached vector; returns how many were embedded."""
    c = client(app)
    if c is None:
        return 0
    fp = ensure_space(app, c)
    todo = missing(app)
    done = 0
    for start in range(0, len(todo), batch):
        # Read a batch's rows when it is sent: one forgotten meanwhile needs no vector.
        rows = tables.memories_by_key(app.conn, [Key(*k) for k in todo[start:start + batch]])
        chunk = list(rows.values())
        if not chunk:
            continue
        vectors = c.embed_documents([document_text(m.caption, m.content) for m in chunk])
        with db.transaction(app.conn):
            for m, v in zip(chunk, vectors):
                index.cache_put(app.conn, m.hash, fp, v)
        done += len(chunk)
        if progress:
            progress(min(start + batch, len(todo)), len(todo))
    return done
