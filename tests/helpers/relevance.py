"""The facts and steps the relevance-check tests share (System One and the chat judge)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from realmem.events import log as evlog
from realmem.fakes import FakeSystemOne
from realmem.events import types as ev
from realmem.read import recall, relevance
from realmem.stores import ids
from realmem.write import memories
from realmem.write.attached import open_attached

FACTS = [("Tests run with vitest", "`pnpm test` runs vitest in watch mode off."),
         ("Vitest config lives in vitest.config.ts", "Coverage thresholds are set in vitest.config.ts."),
         ("Releases are cut on Mondays", "Tag the release on Monday and publish the wheel."),
         ("Lint with ruff", "Run `ruff check` before pushing."),
         ("Docker compose for e2e", "e2e tests need `docker compose up db` first."),
         ("Invoice numbers", "Invoices are numbered INV-YYYY-NNNN.")]


def store_facts(home: Path, repo: Path) -> dict[str, str]:
    """The facts stored BM25-only; caption -> short id."""
    out = {}
    with open_attached(home, repo) as a:
        for caption, content in FACTS:
            m = memories.add(a, caption, content, store=a.project.shared_store, stored_paths=["."],  # type: ignore[union-attr]
                             source="add")
            out[caption] = ids.short(m.id)
    return out


def recall_once(home: Path, repo: Path, query: str) -> tuple[recall.Result, list[ev.RecallHit]]:
    with open_attached(home, repo) as a:
        before = evlog.last_seq(a.conn)
        res = recall.recall(a, queries=[query], embed=lambda _a, _t: None)
        hits = [e.event for e in evlog.read(a.conn, before) if isinstance(e.event, ev.RecallHit)]
    return res, hits


def picks(short_id: str | None) -> Any:
    def answer(state: str, question: dict[str, Any]) -> dict[str, Any]:
        chosen = short_id if short_id in question["criteria"] else relevance.NONE
        return {"probabilities": {chosen: 1.0}}
    return answer


@contextmanager
def answering_late(judge: FakeSystemOne) -> Iterator[None]:
    """The judge answers only once the block is over, so a check inside it times out; the fake's
    handler thread is let go before the server stops."""
    release = threading.Event()

    def slow(state: str, question: dict[str, Any]) -> dict[str, Any]:
        release.wait(10)
        return {"probabilities": {relevance.NONE: 1.0}}

    judge.script({"answers": slow})
    try:
        yield
    finally:
        release.set()


def recalled_by_the_rule(home: Path, repo: Path, judge: FakeSystemOne) -> None:
    """A judge slower than the check's wait leaves the similarity rule's answer, hits counted."""
    store_facts(home, repo)
    with answering_late(judge):
        res, hits = recall_once(home, repo, "vitest tests")
    assert res.items and not res.weak and hits and res.relevance == []
