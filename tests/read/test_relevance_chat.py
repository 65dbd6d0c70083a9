"""Recall's relevance check asked of the chat judge (``recall.relevance`` = ``chat``), against
real HTTP fakes: the chat fake answers the judge JSON from the System One fake's scripts.  The
check is one chat request carrying every candidate; a malformed reply, a 503 or a timeout keeps
the similarity rule; the default (``semif``) never sends recall to the chat model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from realmem.clients import chatjudge
from realmem.fakes import FakeChat, FakeSystemOne
from realmem.read import recall, relevance
from realmem.stores import ids
from realmem.write import memories
from realmem.write.attached import open_attached

from tests.helpers.relevance import picks as _picks, recall_once as _recall, recalled_by_the_rule, store_facts as _store


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """System One's fake (scripted, never configured as semif.url) behind the chat fake."""
    s1 = FakeSystemOne(heuristic=False).start()
    chat = FakeChat(judge=s1).start()
    monkeypatch.setenv("REALMEM_REWRITER_URL", chat.url)
    monkeypatch.setenv("REALMEM_RECALL_RELEVANCE", "chat")
    relevance._cache.clear()
    yield s1, chat
    chat.stop()
    s1.stop()


def _chat_calls(chat: FakeChat) -> list[Any]:
    return [r for r in chat.requests if r.path == "/v1/chat/completions"]


def _similarity_rule(home: Path, repo: Path, query: str) -> list[tuple[str, bool]]:
    with pytest.MonkeyPatch.context() as mp, open_attached(home, repo) as a:
        mp.setenv("REALMEM_RECALL_RELEVANCE", "off")
        res = recall.recall(a, queries=[query], embed=lambda _a, _t: None, count_hits=False)
    return [(i.memory.caption, i.weak) for i in res.items]


def test_one_chat_request_carries_every_candidate_and_the_pick_is_strong(fakes, home: Path, repo: Path,  # type: ignore[no-untyped-def]
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    s1, chat = fakes
    _store(home, repo)
    with open_attached(home, repo) as a:
        deploys = [memories.add(a, f"Deploy step {n}", f"Deploy stage {n} runs after stage {n - 1}.",
                                store=a.project.shared_store, stored_paths=["."], source="add")  # type: ignore[union-attr]
                   for n in range(1, 6)]
    monkeypatch.setenv("REALMEM_SEMIF_MAXOPTIONS", "3")  # System One would need shards; a chat model does not
    s1.script({"answers": _picks(ids.short(deploys[3].id))})
    res, hits = _recall(home, repo, "deploy stage")
    [req] = _chat_calls(chat)
    assert req.body["messages"][0]["content"] == chatjudge.SYSTEM
    asked = json.loads(req.body["messages"][-1]["content"].partition("\n\nQUESTIONS\n")[2])
    assert list(asked) == ["answers"]  # every candidate in the one question
    assert set(asked["answers"]["options"]) == {ids.short(d.id) for d in deploys} | {relevance.NONE}
    assert not [r for r in s1.requests if r.path == "/v1/systemone"]  # System One is not set
    assert [i.memory.caption for i in res.items if not i.weak] == ["Deploy step 4"]
    assert [sorted(h.keys()) for h in hits] == [[(i.memory.store, i.memory.id) for i in res.items if not i.weak]]
    [trace] = res.relevance
    assert trace["judge"] == "chat:fake-chat" and trace["requests"] == 1 and trace["tokens"] > 0


def test_none_turns_a_near_miss_weak_and_counts_no_hit(fakes, home: Path, repo: Path) -> None:  # type: ignore[no-untyped-def]
    s1, _ = fakes
    _store(home, repo)
    assert any(not weak for _, weak in _similarity_rule(home, repo, "vitest tests"))  # a match without the check
    s1.script({"answers": _picks(None)})
    res, hits = _recall(home, repo, "vitest tests")
    assert res.items and res.weak and all(i.weak for i in res.items) and hits == []


def test_the_verdict_is_cached_so_asking_again_sends_nothing(fakes, home: Path, repo: Path) -> None:  # type: ignore[no-untyped-def]
    s1, chat = fakes
    short = _store(home, repo)
    s1.script({"answers": _picks(short["Tests run with vitest"])})
    first, _ = _recall(home, repo, "vitest tests")
    again, _ = _recall(home, repo, "vitest  tests")
    assert len(_chat_calls(chat)) == 1 and again.relevance[0]["cached"] is True
    assert [i.memory.id for i in again.items if not i.weak] == [i.memory.id for i in first.items if not i.weak]


@pytest.mark.parametrize("reply", ["Memory [abc] answers it.", '{"answers": {"answers": {"probabilities": {}}}}'])
def test_a_malformed_reply_keeps_the_similarity_rule(home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                     reply: str) -> None:
    _store(home, repo)
    expected = _similarity_rule(home, repo, "vitest tests")
    with FakeChat(heuristic=False) as chat:
        chat.script(reply)
        monkeypatch.setenv("REALMEM_REWRITER_URL", chat.url)
        monkeypatch.setenv("REALMEM_RECALL_RELEVANCE", "chat")
        relevance._cache.clear()
        res, hits = _recall(home, repo, "vitest tests")
        assert len(_chat_calls(chat)) == 1
    assert [(i.memory.caption, i.weak) for i in res.items] == expected and res.relevance == [] and hits


def test_a_503_keeps_the_similarity_rule_and_is_not_cached(fakes, home: Path, repo: Path) -> None:  # type: ignore[no-untyped-def]
    s1, chat = fakes
    short = _store(home, repo)
    expected = _similarity_rule(home, repo, "vitest tests")
    chat.fail_next(503)
    res, _ = _recall(home, repo, "vitest tests")
    assert [(i.memory.caption, i.weak) for i in res.items] == expected and res.relevance == []
    s1.script({"answers": _picks(short["Lint with ruff"])})
    again, _ = _recall(home, repo, "vitest tests")  # the failure left no verdict behind
    assert again.relevance and again.relevance[0]["cached"] is False


def test_a_chat_model_slower_than_its_timeout_keeps_the_similarity_rule(fakes, home: Path, repo: Path,  # type: ignore[no-untyped-def]
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REALMEM_REWRITER_TIMEOUT", "0.3")
    recalled_by_the_rule(home, repo, fakes[0])


def test_recall_waits_for_the_chat_judge_no_longer_than_its_own_cap(fakes, home: Path, repo: Path,  # type: ignore[no-untyped-def]
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """rewriter.timeout (a remember's patience) stays long; the check gives up at CHAT_TIMEOUT."""
    monkeypatch.setattr(relevance, "CHAT_TIMEOUT", 0.3)
    recalled_by_the_rule(home, repo, fakes[0])


def test_the_default_never_asks_the_chat_model(fakes, home: Path, repo: Path,  # type: ignore[no-untyped-def]
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    s1, chat = fakes
    short = _store(home, repo)
    monkeypatch.delenv("REALMEM_RECALL_RELEVANCE")
    res, _ = _recall(home, repo, "vitest tests")  # no semif.url: no check at all
    assert res.items and res.relevance == []
    monkeypatch.setenv("REALMEM_SEMIF_URL", s1.url)
    s1.script({"answers": _picks(short["Lint with ruff"])})
    res, _ = _recall(home, repo, "vitest tests")
    assert res.relevance[0]["judge"].startswith("semif:")
    assert not _chat_calls(chat)


def test_chat_wins_over_system_one_and_falls_back_to_it_without_a_chat_model(fakes, home: Path, repo: Path,  # type: ignore[no-untyped-def]
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    s1, chat = fakes
    short = _store(home, repo)
    monkeypatch.setenv("REALMEM_SEMIF_URL", s1.url)
    s1.script({"answers": _picks(short["Lint with ruff"])})
    res, _ = _recall(home, repo, "vitest tests")
    assert res.relevance[0]["judge"] == "chat:fake-chat" and len(_chat_calls(chat)) == 1
    assert not [r for r in s1.requests if r.path == "/v1/systemone"]
    monkeypatch.delenv("REALMEM_REWRITER_URL")
    res, _ = _recall(home, repo, "vitest tests")
    assert res.relevance[0]["judge"].startswith("semif:") and len(_chat_calls(chat)) == 1
