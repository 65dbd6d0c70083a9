"""The shipped recall evaluation runs in CI with floors a little under its targets
(dev set: recall@3 >= 0.95 in both modes, strong matches included, no off-topic question
answered with one), so a ranking regression fails here."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from realmem.interface import evaluation
from realmem.interface.cli import cli

RECALL3_FLOOR = 0.93
RECALL1_FLOOR = 0.85
MRR_FLOOR = 0.88


def test_the_development_set_is_what_it_claims() -> None:
    s = evaluation.load_set()
    on = [q for q in s.queries if q.expect]
    off = [q for q in s.queries if not q.expect]
    assert len(s.facts) >= 150 and len(on) >= 120 and len(off) >= 20
    scripts = {"zh": r"[\u4e00-\u9fff]", "ja": r"[\u3041-\u30ff]", "ko": r"[\uac00-\ud7a3]"}
    for name, pattern in scripts.items():
        assert sum(1 for q in on if re.search(pattern, q.text)) >= 15, name
    assert sum(1 for q in on if q.text.isascii()) >= 60
    mixed = [q for q in on if re.search(r"[A-Za-z]{2,}", q.text) and re.search(r"[\u3041-\u30ff\u4e00-\u9fff\uac00-\ud7a3]", q.text)]
    assert len(mixed) >= 10
    assert any(re.search(r"[a-z][A-Z]|_[a-z]|\(\)|!", q.text) for q in on)  # code identifiers
    assert sum(1 for q in on if "/" in q.text) >= 3  # paths
    assert sum(1 for f in s.facts if f.get("source")) >= 10  # drawn from public conventions
    assert len({f["id"] for f in s.facts}) == len(s.facts)


def _check(summary: dict) -> None:
    """Off-topic questions may get weak matches ("no exact match; closest: ..."), never strong ones."""
    assert summary["recall_at_3"] >= RECALL3_FLOOR, summary
    assert summary["strong_recall_at_3"] >= RECALL3_FLOOR, summary  # not by marking everything weak
    assert summary["recall_at_1"] >= RECALL1_FLOOR, summary
    assert summary["mrr"] >= MRR_FLOOR, summary
    assert summary["off_topic_strong"] <= 0.05, summary


def test_eval_recall_bm25_through_the_cli() -> None:
    out = CliRunner().invoke(cli, ["eval", "recall", "--set", "dev", "--mode", "bm25", "--json"])
    assert out.exit_code == 0, out.output
    [summary] = json.loads(out.stdout)
    assert summary["mode"] == "bm25" and summary["queries"] >= 120 and summary["off_topic_queries"] >= 20
    _check(summary)


def test_eval_recall_with_the_fake_embedder() -> None:
    report = evaluation.run_mode("embedder", evaluation.load_set())
    _check(report.summary())
    # hits were counted: the replay is the agent's sequence, not independent queries
    assert any(o.returned for o in report.outcomes)
    text = evaluation.render([report])
    assert "recall@3" in text and "embedder" in text


# The public set (verbatim facts of public projects, questions written blind), tune and
# held-out splits together.  Floors sit a little under what this rule reached (docs/recall.md):
# recall@3 local 0.85 (strong 0.46), BM25 0.75 (0.41); off-topic strong local 0.10, BM25 0.21;
# with the perfect System One fake strong recall@3 0.94 = candidate recall@10, off-topic strong 0;
# with the noisy one (a fixed draw keyed on the texts) 0.91 (strong 0.83) and 0.08.
PUBLIC_FLOORS = {"local": {"recall_at_3": 0.83, "strong_recall_at_3": 0.44, "on_topic_silent_max": 0.03,
                           "off_topic_strong_max": 0.12},
                 "bm25": {"recall_at_3": 0.73, "strong_recall_at_3": 0.39, "on_topic_silent_max": 0.06,
                          "off_topic_strong_max": 0.23},
                 "judge": {"recall_at_3": 0.92, "strong_recall_at_3": 0.92, "on_topic_silent_max": 0.03,
                           "off_topic_strong_max": 0.02},
                 "judge-noisy": {"recall_at_3": 0.89, "strong_recall_at_3": 0.81, "on_topic_silent_max": 0.03,
                                 "off_topic_strong_max": 0.10}}


def test_the_public_set_holds_sources_and_both_splits() -> None:
    s = evaluation.load_set(name="public")
    assert len(s.facts) >= 150 and all(f.get("source") and f.get("content") for f in s.facts)
    assert len({f["source"].split(":")[0] for f in s.facts}) >= 6  # projects
    assert {q.split for q in s.queries} == {"tune", "held-out"}
    assert sum(1 for q in s.queries if q.kind == "crosslingual") >= 15
    assert sum(1 for q in s.queries if q.kind == "nearmiss") >= 15


def test_eval_recall_public_set_every_mode_but_the_fake_embedder() -> None:
    evalset = evaluation.load_set(name="public")
    for mode, floors in PUBLIC_FLOORS.items():
        got = evaluation.run_mode(mode, evalset).summary()
        _holds(got, floors)


def _holds(got: dict, floors: dict[str, float]) -> None:
    """One mode's summary against its floors: recall as seen and strong-only, both silences
    (and, for the perfect judge, candidate recall)."""
    assert got["recall_at_3"] >= floors["recall_at_3"], got
    assert got["strong_recall_at_3"] >= floors["strong_recall_at_3"], got
    assert got["on_topic_silent"] <= floors["on_topic_silent_max"], got
    assert got["off_topic_strong"] <= floors["off_topic_strong_max"], got
    if got["mode"] == "judge":  # a perfect judge picks every right candidate: the pipeline loses nothing after ranking
        assert got["strong_recall_at_3"] >= got["candidate_recall_at_10"] - 0.01, got


def test_a_split_store_holds_its_own_projects_facts_unless_all_are_asked() -> None:
    every = evaluation.load_set(name="public")
    held, tune = (evaluation.load_set(name="public", split=s) for s in ("held-out", "tune"))
    held_all = evaluation.load_set(name="public", split="held-out", store="all")
    project = {f["id"]: f["source"].split(":")[0] for f in every.facts}
    asked = {p for q in held.queries for p in (project[i] for i in q.expect)}
    assert {project[f["id"]] for f in held.facts} == asked  # the held-out projects, each answering some question
    assert not {f["id"] for f in held.facts} & {f["id"] for f in tune.facts}
    assert len(held.facts) + len(tune.facts) == len(every.facts) == len(held_all.facts)
    assert held_all.queries == held.queries
    assert evaluation.load_set(split="tune").facts == evaluation.load_set().facts  # dev: no projects, one store


def test_a_question_cannot_expect_a_fact_its_split_store_leaves_out(tmp_path) -> None:
    path = tmp_path / "set.yaml"
    path.write_text(
        "facts:\n"
        "- {id: a1, source: 'o/a:AGENTS.md', caption: Run tests with make, content: Run make test.}\n"
        "- {id: b1, source: 'o/b:AGENTS.md', caption: Lint with ruff, content: Run ruff check.}\n"
        "queries:\n"
        "- {q: how do I run the tests?, expect: [a1], repo: o/a, split: tune}\n"
        "- {q: which linter do I run?, expect: [a1], repo: o/b, split: held-out}\n", "utf-8")
    assert [f["id"] for f in evaluation.load_set(path, split="tune").facts] == ["a1"]
    assert len(evaluation.load_set(path, split="held-out", store="all").facts) == 2
    with pytest.raises(ValueError, match=r"expects unknown facts \['a1'\]"):
        evaluation.load_set(path, split="held-out")


# Held-out figures as the issues measured them (each split one store of its own six projects),
# the figures to quote (docs/recall.md): local 0.875 (strong 0.54), on-topic silent 0.01,
# off-topic strong 0.07; BM25 0.80 (0.40), 0.14; perfect judge 0.96 = candidate recall@10, 0.00;
# noisy 0.96 (strong 0.86), 0.11.  The targets: local >= 0.85, on-topic silent <= 0.10,
# off-topic strong <= 0.10; BM25 >= 0.65; perfect judge strong >= 0.80, off-topic strong <= 0.05.
HELD_OUT_FLOORS = {"local": {"recall_at_3": 0.85, "strong_recall_at_3": 0.52, "on_topic_silent_max": 0.03,
                             "off_topic_strong_max": 0.10},
                   "bm25": {"recall_at_3": 0.78, "strong_recall_at_3": 0.38, "on_topic_silent_max": 0.05,
                            "off_topic_strong_max": 0.16},
                   "judge": {"recall_at_3": 0.94, "strong_recall_at_3": 0.94, "on_topic_silent_max": 0.03,
                             "off_topic_strong_max": 0.02},
                   "judge-noisy": {"recall_at_3": 0.93, "strong_recall_at_3": 0.84, "on_topic_silent_max": 0.03,
                                   "off_topic_strong_max": 0.14}}


def test_eval_recall_held_out_in_its_own_store_meets_the_targets() -> None:
    evalset = evaluation.load_set(name="public", split="held-out")
    got = {mode: evaluation.run_mode(mode, evalset).summary() for mode in (*HELD_OUT_FLOORS, "judge-chat")}
    for mode, floors in HELD_OUT_FLOORS.items():
        _holds(got[mode], floors)
    # The chat judge behind a chat endpoint, answering from the perfect System One fake: the
    # check sees every candidate in one question, so it must pick what System One picks.
    chat, semif = got["judge-chat"], got["judge"]
    assert chat["mode"] == "judge-chat" and {k: v for k, v in chat.items() if k != "mode"} == \
        {k: v for k, v in semif.items() if k != "mode"}
