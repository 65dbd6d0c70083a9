"""The facts and steps the relevance-check tests share (System One and the chat judge)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from realmem.events import log as evlog
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
