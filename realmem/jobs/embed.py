"""Background embedding: every memory lacking a cached vector in the active space."""

from __future__ import annotations

from pathlib import Path

from realmem.read import embedder
from realmem.app import Realmem
from realmem.clients import EndpointError, EndpointUnavailable
from realmem.logs import get_logger

log = get_logger("realmem.jobs.embed")


def open_home(home: Path) -> Realmem:
    """An app on the home directory itself: no project, no store registration, no scan."""
    return Realmem(Path(home), Path(home))


def run_embed(home: Path) -> int:
    """Embed what is missing; returns how many memories were embedded (0 when the embedder is
    not configured or down: the next wake-up or worker start tries again)."""
    app = open_home(home)
    try:
        if not app.config.embedding_enabled():
            return 0
        try:
            n = embedder.embed_missing(app)
        except (EndpointUnavailable, EndpointError) as exc:
            log.warning("embed.failed", error=str(exc))
            return 0
        if n:
            log.info("embed.done", embedded=n)
        return n
    finally:
        app.close()

