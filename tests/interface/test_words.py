"""Counted nouns in user text: "1 memory" / "2 memories", "1 fact" / "2 facts", through the real
texts people read (status, recall, list, consolidation, import, rpc)."""

from __future__ import annotations

import re
from pathlib import Path

from realmem.interface import status
from realmem.write import memories
from realmem.app import Realmem
from realmem.jobs.consolidate import Report
from realmem.read.recall import listing, recall
from realmem.interface.render import consolidation_text, recall_text, status_text
from realmem.words import count
from realmem.write.attached import open_attached


def test_count():
    assert [count(n, "memory") for n in (0, 1, 2)] == ["0 memories", "1 memory", "2 memories"]
    assert [count(n, "fact") for n in (1, 2)] == ["1 fact", "2 facts"]
    assert count(2, "key") == "2 keys" and count(2, "match") == "2 matches"
    assert count(1, "memory is", "memories are") == "1 memory is"
    assert count(3, "memory is", "memories are") == "3 memories are"


def _add(app: Realmem, caption: str) -> None:
    memories.add(app, caption, f"{caption}: details.", store=app.project.shared_store, stored_paths=["."],
                 source="add")


def test_texts_say_one_memory_and_two_memories(home: Path, repo: Path) -> None:
    with open_attached(home, repo) as app:
        _add(app, "Deploy with make deploy")
        shared = lambda: next(ln for ln in status_text(status.gather(app)).splitlines()  # noqa: E731
                              if ln.strip().startswith("shared"))
        assert re.search(r"\b1 memory\b", shared())
        assert recall_text(recall(app, queries=["deploy"])).startswith("1 memory, page 1 of 1:")
        _add(app, "Deploy previews with make preview")
        assert re.search(r"\b2 memories\b", shared())
        assert recall_text(recall(app, queries=["deploy"])).startswith("2 memories, page 1 of 1:")
        assert listing(app).total == 2
    one = consolidation_text(Report([], 1, ["global"]))
    assert one.startswith("Consolidation reviewed 1 memory (global): 0 changes.")
    two = consolidation_text(Report([], 2, ["global"]))
    assert two.startswith("Consolidation reviewed 2 memories (global): 0 changes.")


def test_no_count_text_is_left_with_a_fixed_plural():
    """Every f-string that prints a number before a noun goes through words.count."""
    root = Path(__file__).resolve().parents[2] / "realmem"
    fixed = re.compile(r"\{([^{}]+)\} (memories|facts|memory|fact|changes|files|vectors|events|requests)\b(?!/)")
    not_counts = ("_scope_label(", "store_kind(")  # "a new shared memory", not a number
    offenders = [f"{p.relative_to(root)}:{i}: {line.strip()}"
                 for p in root.rglob("*.py") if "fakes" not in p.parts
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 for m in fixed.finditer(line) if not m.group(1).startswith(not_counts)]
    assert offenders == []
