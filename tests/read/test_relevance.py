"""Recall's System One relevance check against a real HTTP fake: the request it sends, the
options split under the server's limit, the verdict's cache, and the fallback to the
similarity rule on 503, 422 and a timeout, with nothing lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from realmem.fakes import FakeSystemOne
from realmem.read import recall, relevance
from realmem.stores import ids
from realmem.write import memories
from realmem.write.attached import open_attached

from tests.helpers.relevance import picks as _picks, recall_once as _recall, recalled_by_the_rule, store_facts as _store

@pytest.fixture
def judge(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    s1 = FakeSystemOne(heuristic=False).start()
    monkeypatch.setenv("REALMEM_SEMIF_URL", s1.url)
    relevance._cache.clear()
    yield s1
    s1.stop()


def test_one_request_names_the_candidates_and_the_pick_is_the_only_match(judge: FakeSystemOne, home: Path,
                                                                        repo: Path) -> None:
    short = _store(home, repo)
    judge.script({"answers": _picks(short["Vitest config lives in vitest.config.ts"])})
    res, hits = _recall(home, repo, "vitest tests")
    [req] = [r for r in judge.requests if r.path == "/v1/systemone"]
    assert req.body["state"].startswith("Question: vitest tests\n\nMemories:\n[")
    [(name, q)] = req.body["questions"].items()
    assert name == "answers" and q["type"] == "choice" and list(q["criteria"])[-1] == "none"
    offered = set(q["criteria"]) - {"none"}
    assert {short["Tests run with vitest"], short["Vitest config lives in vitest.config.ts"]} <= offered
    strong = [i.memory.caption for i in res.items if not i.weak]
    assert strong == ["Vitest config lives in vitest.config.ts"] and not res.weak
    assert "Tests run with vitest" in [i.memory.caption for i in res.items if i.weak]  # another candidate
    assert [sorted(h.keys()) for h in hits] == [[(i.memory.store, i.memory.id) for i in res.items if not i.weak]]
    [trace] = res.relevance
    assert trace["judge"] == "semif:fake-semif" and trace["relevant"] == [short["Vitest config lives in vitest.config.ts"]]
    assert trace["latency_ms"] >= 0 and trace["requests"] == 1


def test_none_leaves_only_weak_matches_and_no_hit(judge: FakeSystemOne, home: Path, repo: Path) -> None:
    _store(home, repo)
    judge.script({"answers": _picks(None)})
    res, hits = _recall(home, repo, "vitest tests")
    assert res.items and res.weak and all(i.weak for i in res.items) and hits == []


def test_options_past_the_server_limit_are_split_and_folded_back(judge: FakeSystemOne, home: Path, repo: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _store(home, repo)
    with open_attached(home, repo) as a:
        deploys = [memories.add(a, f"Deploy step {n}", f"Deploy stage {n} runs after stage {n - 1}.",
                                store=a.project.shared_store, stored_paths=["."], source="add")  # type: ignore[union-attr]
                   for n in range(1, 6)]
    monkeypatch.setenv("REALMEM_SEMIF_MAXOPTIONS", "3")
    judge.configure(max_options=3)
    target = ids.short(deploys[3].id)
    judge.script({f"answers{s}": _picks(target) for s in ("", "__1", "__2", "__3", "__4", "__5")})
    res, _ = _recall(home, repo, "deploy stage")
    [req] = [r for r in judge.requests if r.path == "/v1/systemone"]
    shards = req.body["questions"]
    assert len(shards) >= 2 and all(len(q["criteria"]) <= 3 and "none" in q["criteria"] for q in shards.values())
    assert [i.memory.caption for i in res.items if not i.weak] == ["Deploy step 4"]


def test_the_verdict_is_cached_for_the_same_question_and_candidates(judge: FakeSystemOne, home: Path,
                                                                    repo: Path) -> None:
    short = _store(home, repo)
    judge.script({"answers": _picks(short["Tests run with vitest"])})
    first, _ = _recall(home, repo, "vitest tests")
    again, _ = _recall(home, repo, "vitest   tests")
    assert len([r for r in judge.requests if r.path == "/v1/systemone"]) == 1
    assert [i.memory.id for i in again.items if not i.weak] == [i.memory.id for i in first.items if not i.weak]
    assert again.relevance[0]["cached"] is True


@pytest.mark.parametrize("status", [503, 422])
def test_an_endpoint_error_keeps_the_similarity_rule(judge: FakeSystemOne, home: Path, repo: Path,
                                                      status: int) -> None:
    _store(home, repo)
    with open_attached(home, repo) as a:
        a.config.set("recall.relevance", "off")
        expected = [(i.memory.caption, i.weak) for i in recall.recall(a, queries=["vitest tests"],
                                                                          embed=lambda _a, _t: None,
                                                                          count_hits=False).items]
        a.config.set("recall.relevance", "semif")
    judge.fail_next(status, n=5)
    res, hits = _recall(home, repo, "vitest tests")
    assert [(i.memory.caption, i.weak) for i in res.items] == expected and res.relevance == []
    assert hits and any(not w for _, w in expected)


def test_a_judge_slower_than_its_timeout_keeps_the_similarity_rule(judge: FakeSystemOne, home: Path, repo: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REALMEM_SEMIF_TIMEOUT", "0.3")
    recalled_by_the_rule(home, repo, judge)


def test_off_sends_nothing(judge: FakeSystemOne, home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _store(home, repo)
    monkeypatch.setenv("REALMEM_RECALL_RELEVANCE", "off")
    res, _ = _recall(home, repo, "vitest tests")
    assert res.items and not [r for r in judge.requests if r.path == "/v1/systemone"]
