"""The chat judge against a real chat-completions fake on 127.0.0.1: good answers map into
System One's shapes; malformed, incomplete or out-of-range answers are endpoint errors."""

from __future__ import annotations

import json

import pytest

from realmem.clients import ChatClient, ChoiceAnswer, EndpointError, NoulAnswer, ScoreAnswer
from realmem.clients.chatjudge import ChatJudge
from realmem.fakes import FakeChat
from helpers.judge_script import QUESTIONS, STATE

GOOD = {"answers": {
    "covered_by": {"probabilities": {"AZJrPlwafS-aSxwtPk9aaw": 0.9, "AZJrPmEw1-8Vr0xkmp2Bqw": 0.05, "none": 0.05}},
    "importance": {"probabilities": {"0": 0, "1": 0, "2": 0.2, "3": 0.5, "4": 0.3}},
    "durable": {"probabilities": {"true": 0.8, "false": 0.2}},
}}


@pytest.fixture
def chat():  # type: ignore[no-untyped-def]
    with FakeChat(heuristic=False) as fake:
        yield fake


def ask(chat: FakeChat, reply: str):  # type: ignore[no-untyped-def]
    chat.script(reply)
    judge = ChatJudge(ChatClient(chat.url, model="fake-chat"))
    try:
        return judge, judge.ask(STATE, QUESTIONS)
    finally:
        judge.close()


def test_a_good_answer_maps_into_system_one_shapes(chat: FakeChat):
    judge, answers = ask(chat, "```json\n" + json.dumps(GOOD) + "\n```")
    assert judge.name == "chat:fake-chat" and answers.requests == 1
    assert answers.usage["total_tokens"] > 0
    cov = answers["covered_by"]
    assert isinstance(cov, ChoiceAnswer) and cov.choice == "AZJrPlwafS-aSxwtPk9aaw" and cov.p == pytest.approx(0.9)
    imp = answers["importance"]
    assert isinstance(imp, ScoreAnswer) and imp.score == pytest.approx(3.1) and imp.normalized == pytest.approx(0.775)
    assert isinstance(answers["durable"], NoulAnswer) and answers["durable"].p == pytest.approx(0.8)
    body = chat.requests[-1].body
    assert body["temperature"] == 0 and len(chat.requests) == 1
    assert "AZJrPmEw1-8Vr0xkmp2Bqw" in body["messages"][-1]["content"]


def bad(**change):  # type: ignore[no-untyped-def]
    answers = json.loads(json.dumps(GOOD["answers"]))
    answers.update(change)
    return json.dumps({"answers": answers})


@pytest.mark.parametrize("reply, reason", [
    ("I cannot judge that.", "holds no JSON object"),
    ('{"answers": {"covered_by": ', "holds no JSON object"),
    (json.dumps({"verdict": "add"}), "no answers object"),
    (json.dumps({"answers": {k: v for k, v in GOOD["answers"].items() if k != "durable"}}),
     "lacks an answer to 'durable'"),
    (bad(durable={"probabilities": {"true": 1.0}}), "lacks options ['false']"),
    (bad(durable={"probabilities": {"true": 1.4, "false": -0.4}}), "not one in 0..1"),
    (bad(durable={"probabilities": {"true": "high", "false": 0.1}}), "not one in 0..1"),
    (bad(durable={"probabilities": {"true": 0.9, "false": 0.9}}), "sum to 1.8"),
    (bad(durable={"p": 0.9}), "no probabilities object"),
])
def test_an_unusable_answer_is_an_endpoint_error(chat: FakeChat, reply: str, reason: str):
    with pytest.raises(EndpointError, match="chat judge") as caught:
        ask(chat, reply)
    assert reason in str(caught.value)


@pytest.mark.parametrize("script", [
    {},  # the fake's heuristic
    {"covered_by": {"choice": "AZJrPmEw1-8Vr0xkmp2Bqw", "p": 0.7},
     "importance": {"probabilities": [0, 0.1, 0.6, 0.3, 0]}, "durable": 0.2},
], ids=["heuristic", "scripted"])
def test_the_chat_fakes_judge_mode_answers_as_system_one_does(script):  # type: ignore[no-untyped-def]
    """The chat fake in judge mode answers the chat judge from a System One fake's scripts, so
    either judge reads the same answers; the chat wire (usage included) is the real one."""
    from realmem.clients import SystemOneClient
    from realmem.fakes import FakeSystemOne

    with FakeSystemOne() as s1, FakeChat(judge=s1) as chat:
        s1.script(script)
        semif = SystemOneClient(s1.url, model="fake-semif")
        judge = ChatJudge(ChatClient(chat.url, model="fake-chat"))
        try:
            direct, via_chat = semif.ask(STATE, QUESTIONS), judge.ask(STATE, QUESTIONS)
        finally:
            semif.close()
            judge.close()
    assert via_chat.usage["total_tokens"] > 0 and chat.requests[-1].path == "/v1/chat/completions"
    for name in QUESTIONS:
        a, b = direct[name], via_chat[name]
        assert type(a) is type(b), name
        assert b.p == pytest.approx(a.p) if isinstance(a, NoulAnswer) else b.probabilities == pytest.approx(a.probabilities)
        if isinstance(a, ChoiceAnswer):
            assert (b.choice, b.p, b.confidence) == (a.choice, pytest.approx(a.p), pytest.approx(a.confidence, abs=1e-6))
        if isinstance(a, ScoreAnswer):
            assert (b.score, b.confidence) == (pytest.approx(a.score), pytest.approx(a.confidence, abs=1e-6))
    assert direct["durable"].p == (0.2 if script else 0.9)
