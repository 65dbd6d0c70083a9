"""The three endpoint clients against the fake servers, over real loopback HTTP."""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from realmem.clients import (
    BRIDGE_MODEL,
    ChatClient,
    ChoiceAnswer,
    EmbeddingsClient,
    EndpointError,
    EndpointUnavailable,
    NotConfigured,
    NoulAnswer,
    Question,
    RequestTooLarge,
    ScoreAnswer,
    SystemOneClient,
    combine_choice,
    extract_json_object,
    list_models,
    pick_model,
    shard_choice,
)
from realmem.config import Config
from realmem.fakes import FakeChat, FakeEmbeddings, FakeSystemOne, build_answer, fake_embedding
from realmem.fakes.heuristic import Judgement, parse_state

from helpers.judge_script import QUESTIONS, STATE

SECRET = "sk-test-9f8e7d6c5b4a"


# -- fixtures (started and stopped here: conftest.py belongs to others) -----------------------


@pytest.fixture
def semif() -> Iterator[FakeSystemOne]:
    with FakeSystemOne() as server:
        yield server


@pytest.fixture
def embed() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings() as server:
        yield server


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    with FakeChat() as server:
        yield server


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def _posts(server: FakeSystemOne | FakeEmbeddings | FakeChat, path: str) -> list:
    return [r for r in server.requests if r.path == path]


# -- models ------------------------------------------------------------------------------------


def test_list_models_reads_both_shapes(semif: FakeSystemOne, embed: FakeEmbeddings) -> None:
    semif.configure(models=["jev-1", "jev-2"])
    assert list_models(semif.url, "", 5) == ["jev-1", "jev-2"]
    assert list_models(embed.url + "/v1/", "", 5) == ["fake-embed"]  # a pasted /v1 is tolerated


def test_pick_model() -> None:
    assert pick_model("mine", ["a", "b"]) == "mine"
    assert pick_model("(auto)", ["only"]) == "only"
    assert pick_model("", ["only"]) == "only"
    several = r"^the server lists several models \(a, b\); pick one with realmem settings set semif.model VALUE$"
    with pytest.raises(EndpointError, match=several):
        pick_model("(auto)", ["a", "b"], "semif.model")
    with pytest.raises(EndpointError, match="no models"):
        pick_model("", [])


def test_auto_model_is_resolved_once_per_process(semif: FakeSystemOne) -> None:
    client = SystemOneClient(semif.url, model="(auto)")
    client.ask(STATE, {"durable": QUESTIONS["durable"]})
    answers = client.ask(STATE, {"durable": QUESTIONS["durable"]})
    assert answers.model == "fake-semif"
    assert SystemOneClient(semif.url, model="(auto)").model == "fake-semif"  # the next remember's client
    assert [r.path for r in semif.requests].count("/v1/models") == 1
    assert _posts(semif, "/v1/systemone")[0].body["model"] == "fake-semif"
    semif.configure(key=SECRET)  # another key is another entry: asked again, with that key
    assert SystemOneClient(semif.url, key=SECRET).model == "fake-semif"
    assert [r.headers.get("authorization") for r in semif.requests if r.path == "/v1/models"] == [
        None, f"Bearer {SECRET}"]


def test_auto_model_expires(semif: FakeSystemOne, monkeypatch: pytest.MonkeyPatch) -> None:
    from realmem.clients import base

    first = SystemOneClient(semif.url)
    assert first.model == "fake-semif"
    semif.configure(models=["jev-2"])
    assert SystemOneClient(semif.url).model == "fake-semif"  # still within AUTO_MODEL_TTL
    monkeypatch.setattr(base, "AUTO_MODEL_TTL", 0.0)  # as if the TTL had passed
    assert SystemOneClient(semif.url).model == "jev-2"
    assert first.model == "fake-semif"  # a client keeps its model for its life
    assert [r.path for r in semif.requests].count("/v1/models") == 2


def test_auto_model_errors_are_not_cached(semif: FakeSystemOne) -> None:
    semif.fail_next(503)
    with pytest.raises(EndpointUnavailable, match=r"^SemIf endpoint unavailable \(503\)"):
        _ = SystemOneClient(semif.url).model
    semif.configure(models=["jev-1", "jev-2"])
    with pytest.raises(EndpointError, match="several models"):
        _ = SystemOneClient(semif.url).model
    semif.configure(models=["jev-1"])
    assert SystemOneClient(semif.url).model == "jev-1"
    assert SystemOneClient(semif.url).model == "jev-1"
    assert [r.path for r in semif.requests].count("/v1/models") == 3


def test_auto_model_fails_clearly_with_several_models(semif: FakeSystemOne, embed: FakeEmbeddings) -> None:
    semif.configure(models=["jev-1", "jev-2"])
    with pytest.raises(EndpointError, match=r"several models \(jev-1, jev-2\); pick one with realmem settings set semif.model VALUE"):
        SystemOneClient(semif.url).ask(STATE, {"durable": QUESTIONS["durable"]})
    embed.configure(models=["e1", "e2", "e3"])
    with pytest.raises(EndpointError, match=r"several models \(e1, e2, e3\)"):
        EmbeddingsClient(embed.url, model="(auto)").embed_query("x")
    embed.configure(models=[])
    with pytest.raises(EndpointError, match="no models"):
        EmbeddingsClient(embed.url).embed_query("x")


def test_named_model_skips_the_model_list(semif: FakeSystemOne) -> None:
    SystemOneClient(semif.url, model="fake-semif").ask(STATE, {"durable": QUESTIONS["durable"]})
    assert [r.path for r in semif.requests] == ["/v1/systemone"]


# -- System One ------------------------------------------------------------------------------


def test_ask_parses_every_answer_type_and_keeps_raw(semif: FakeSystemOne) -> None:
    semif.script({"covered_by": {"choice": "AZJrPmEw1-8Vr0xkmp2Bqw", "p": 0.7, "confidence": 0.4},
                  "importance": {"score": 0.75}, "durable": {"noul": 0.2}})
    answers = SystemOneClient(semif.url).ask(STATE, QUESTIONS)
    covered, importance, durable = answers["covered_by"], answers["importance"], answers["durable"]
    assert answers.choice("covered_by") is covered and answers.score("importance") is importance
    with pytest.raises(EndpointError, match="is a NoulAnswer, not a ScoreAnswer"):
        answers.score("durable")
    assert isinstance(covered, ChoiceAnswer) and covered.choice == "AZJrPmEw1-8Vr0xkmp2Bqw"
    assert covered.p == pytest.approx(0.7) and covered.confidence == 0.4
    assert sum(covered.probabilities.values()) == pytest.approx(1.0)
    assert isinstance(importance, ScoreAnswer)
    assert importance.score == pytest.approx(3.0) and importance.normalized == pytest.approx(0.75)
    assert list(importance.probabilities) == ["0", "1", "2", "3", "4"]
    assert importance.legend["4"] == "broken"
    assert isinstance(durable, NoulAnswer) and durable.p == pytest.approx(0.2)
    assert durable.raw == {"type": "noul", "noul": 0.2, "temperature": 1.0, "option_mass": 0.97}
    assert covered.raw["probabilities"] == covered.probabilities
    assert answers.usage["output_tokens"] == 3 and answers.requests == 1
    body = _posts(semif, "/v1/systemone")[0].body
    assert body["state"] == STATE
    assert body["questions"]["importance"] == {"type": "score", "instructions": "How bad is forgetting it?",
                                               "criteria": ["trivial", "minor", "useful", "major", "broken"]}
    assert body["questions"]["covered_by"]["criteria"]["none"] == "no memory covers it"


def test_score_script_with_explicit_level_probabilities(semif: FakeSystemOne) -> None:
    semif.script({"importance": {"probabilities": [0.1, 0.2, 0.4, 0.2, 0.1]}})
    answer = SystemOneClient(semif.url).ask(STATE, {"importance": QUESTIONS["importance"]})["importance"]
    assert answer.score == pytest.approx(2.0)
    assert answer.probabilities["2"] == pytest.approx(0.4)


def test_script_queue_then_heuristic_default(semif: FakeSystemOne) -> None:
    semif.script({"durable": [{"noul": 0.01}, 0.02]})
    client = SystemOneClient(semif.url)
    ps = [client.ask(STATE, {"durable": QUESTIONS["durable"]})["durable"].p for _ in range(3)]
    assert ps == [0.01, 0.02, 0.9]


def test_heuristic_judge_reads_the_state() -> None:
    candidate, neighbours = parse_state(STATE)
    assert candidate.startswith("Caption: Run e2e") and "Neighbours" not in candidate
    assert list(neighbours) == ["AZJrPlwafS-aSxwtPk9aaw", "AZJrPmEw1-8Vr0xkmp2Bqw"]
    ids = [*neighbours, "none"]
    judgement = Judgement(STATE)
    assert judgement.pick("covered_by", ids)[0] == "AZJrPlwafS-aSxwtPk9aaw"
    conflict = "Postgres listens on port 5433\nNeighbours:\n[abc] Postgres listens on port 5432\n[def] unrelated words"
    assert Judgement(conflict).pick("conflict_with", ["abc", "def"])[0] == "abc"
    assert Judgement(conflict).pick("covered_by", ["abc", "def"])[0] is None
    tools = "Unit tests run with vitest in packages/a\nNeighbours:\n[abc] Unit tests run with jest in packages/a"
    assert Judgement(tools).pick("conflict_with", ["abc"])[0] == "abc"
    assert Judgement("Currently debugging the WIP branch").answer("durable", {"type": "noul"})["noul"] < 0.5
    action = {"type": "choice", "criteria": {"add": "new", "edit": "fix", "merge": "join", "reinforce": "same"}}
    assert Judgement(conflict).answer("action", action)["choice"] == "edit"
    assert Judgement(STATE).answer("action", action)["choice"] == "reinforce"


def test_heuristic_answers_through_the_server(semif: FakeSystemOne) -> None:
    answers = SystemOneClient(semif.url).ask(STATE, QUESTIONS)
    assert answers["covered_by"].choice == "AZJrPlwafS-aSxwtPk9aaw"
    assert answers["covered_by"].p >= 0.6
    assert answers["importance"].normalized == pytest.approx(0.75)
    assert answers["durable"].p == pytest.approx(0.9)


def test_strict_fake_refuses_unscripted_questions(semif: FakeSystemOne) -> None:
    semif.configure(heuristic=False)
    with pytest.raises(EndpointError, match="no script for question 'durable'"):
        SystemOneClient(semif.url).ask(STATE, {"durable": QUESTIONS["durable"]})


def test_too_large_requests_are_halved_until_they_fit(semif: FakeSystemOne) -> None:
    semif.configure(max_questions=2)
    questions = {f"q{i}": Question("noul", f"question {i}?") for i in range(5)}
    semif.script({f"q{i}": {"noul": i / 10} for i in range(5)})
    answers = SystemOneClient(semif.url, max_questions=8).ask("state", questions)
    assert {name: a.p for name, a in answers.items()} == {f"q{i}": i / 10 for i in range(5)}
    sizes = [len(r.body["questions"]) for r in _posts(semif, "/v1/systemone")]
    assert sizes == [5, 2, 3, 1, 2]  # two refused, three answered
    assert [s for s in sizes if s <= 2] == [2, 1, 2]
    assert answers.requests == 5
    assert answers.usage["output_tokens"] == 5


def test_max_questions_setting_groups_requests(semif: FakeSystemOne) -> None:
    semif.configure(max_questions=2)
    questions = {f"q{i}": Question("noul", f"question {i}?") for i in range(5)}
    answers = SystemOneClient(semif.url, max_questions=2).ask("state", questions)
    assert list(answers) == list(questions)
    assert [len(r.body["questions"]) for r in _posts(semif, "/v1/systemone")] == [2, 2, 1]


def test_single_question_too_large_raises(semif: FakeSystemOne) -> None:
    options = {f"id{i}": f"neighbour {i}" for i in range(16)} | {"none": "none"}
    with pytest.raises(RequestTooLarge, match="too many options: 17 > 16"):
        SystemOneClient(semif.url).ask("state", {"covered_by": Question("choice", "which?", options)})


def test_other_422_is_a_plain_endpoint_error(semif: FakeSystemOne) -> None:
    with pytest.raises(EndpointError) as info:
        SystemOneClient(semif.url, model="no-such-model").ask("state", {"durable": QUESTIONS["durable"]})
    assert not isinstance(info.value, RequestTooLarge)
    assert "unknown model 'no-such-model'" in str(info.value) and info.value.status == 422


def test_fake_validates_the_wire_shape(semif: FakeSystemOne) -> None:
    good = {"model": "fake-semif", "state": "s", "questions": {"q": {"type": "noul", "instructions": "?"}}}
    assert httpx.post(semif.url + "/v1/systemone", json=good).status_code == 200
    bad = [
        {**good, "extra": 1},
        {**good, "questions": {"q": {"type": "bool", "instructions": "?"}}},
        {**good, "questions": {"q": {"type": "choice", "instructions": "?", "criteria": {"only": "one"}}}},
        {**good, "questions": {"q": {"type": "score", "instructions": "?", "criteria": [str(i) for i in range(11)]}}},
        {**good, "questions": {"q": {"type": "score", "instructions": "?", "criteria": {"a": "b"}}}},
        {**good, "questions": {}},
    ]
    for body in bad:
        assert httpx.post(semif.url + "/v1/systemone", json=body).status_code == 422, body


def test_malformed_answer_is_an_endpoint_error(semif: FakeSystemOne) -> None:
    semif.script({"durable": {"raw": {"type": "choice", "choice": "x", "probabilities": {"x": 1}}}})
    with pytest.raises(EndpointError, match="answered a noul question with type 'choice'"):
        SystemOneClient(semif.url).ask(STATE, {"durable": QUESTIONS["durable"]})


def test_from_config_resolves_key_variables(semif: FakeSystemOne, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    semif.configure(key=SECRET)
    monkeypatch.setenv("TEST_SEMIF_KEY", SECRET)
    (tmp_path / "config.json").write_text(json.dumps({
        "semif.url": semif.url, "semif.key": "$TEST_SEMIF_KEY", "semif.maxQuestions": 3}))
    client = SystemOneClient.from_config(Config(tmp_path))
    assert client.max_questions == 3 and client.max_options == 16
    assert client.ask(STATE, {"durable": QUESTIONS["durable"]})["durable"].p == pytest.approx(0.9)
    assert semif.requests[-1].headers["authorization"] == f"Bearer {SECRET}"


def test_no_authorization_header_without_key(semif: FakeSystemOne) -> None:
    SystemOneClient(semif.url).ask(STATE, {"durable": QUESTIONS["durable"]})
    assert all("authorization" not in r.headers for r in semif.requests)


# -- failures --------------------------------------------------------------------------------


@pytest.fixture
def fresh_http_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """A logger not yet used: structlog caches a logger on first use (cache_logger_on_first_use),
    so one an earlier test used in this process would bypass capture_logs."""
    from realmem.clients import _http
    from realmem.logs import get_logger
    monkeypatch.setattr(_http, "log", get_logger(_http.__name__))


@pytest.mark.usefixtures("fresh_http_log")
def test_bad_key_gives_a_clear_401_without_leaking_it(semif: FakeSystemOne, caplog: pytest.LogCaptureFixture) -> None:
    semif.configure(key="the-right-key")
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as logs, pytest.raises(EndpointError) as info:
        SystemOneClient(semif.url, key=SECRET, model="fake-semif").ask(STATE, {"durable": QUESTIONS["durable"]})
    assert str(info.value).startswith(f"authentication failed (401) for {semif.url}/v1/systemone")
    assert info.value.status == 401
    assert logs and any(entry["event"] == "endpoint.error" for entry in logs)
    assert SECRET not in str(info.value) + repr(logs) + caplog.text


@pytest.mark.usefixtures("fresh_http_log")
def test_credentials_in_the_url_stay_out_of_messages(semif: FakeSystemOne) -> None:
    semif.configure(key="k")
    with structlog.testing.capture_logs() as logs, pytest.raises(EndpointError) as info:
        list_models(semif.url.replace("http://", "http://user:pw-secret@"), "", 5)
    assert str(info.value).startswith(f"authentication failed (401) for {semif.url}/v1/models")
    assert "pw-secret" not in str(info.value) + repr(logs)


def test_503_with_retry_after_is_unavailable(semif: FakeSystemOne) -> None:
    semif.fail_next(503, retry_after=7)
    client = SystemOneClient(semif.url, model="fake-semif")
    with pytest.raises(EndpointUnavailable) as info:
        client.ask(STATE, {"durable": QUESTIONS["durable"]})
    assert info.value.retry_after == 7 and info.value.status == 503
    assert client.ask(STATE, {"durable": QUESTIONS["durable"]})["durable"].p == pytest.approx(0.9)


def test_500_without_retry_after(embed: FakeEmbeddings) -> None:
    embed.fail_next(500)
    with pytest.raises(EndpointUnavailable) as info:
        EmbeddingsClient(embed.url, model="fake-embed").embed_query("x")
    assert info.value.retry_after is None and info.value.status == 500


def test_down_refuses_connections_and_up_reuses_the_port(semif: FakeSystemOne) -> None:
    client = SystemOneClient(semif.url, model="fake-semif")
    client.ask(STATE, {"durable": QUESTIONS["durable"]})
    url = semif.url
    semif.down()
    with pytest.raises(EndpointUnavailable, match="unreachable"):
        client.ask(STATE, {"durable": QUESTIONS["durable"]})
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/v1/models")
    semif.up()
    assert semif.url == url
    assert client.ask(STATE, {"durable": QUESTIONS["durable"]})["durable"].p == pytest.approx(0.9)


def test_timeout_is_unavailable(semif: FakeSystemOne) -> None:
    release = threading.Event()

    def stall(state: str, question: dict) -> dict:
        release.wait()
        return {"noul": 0.5}

    semif.script({"durable": stall})
    try:
        with pytest.raises(EndpointUnavailable, match="timed out"):
            SystemOneClient(semif.url, model="fake-semif", timeout=0.2).ask(STATE, {"durable": QUESTIONS["durable"]})
    finally:
        release.set()


def test_url_without_scheme_is_a_configuration_error() -> None:
    with pytest.raises(EndpointError, match="URL is invalid"):
        SystemOneClient("127.0.0.1:9", model="m").ask(STATE, {"durable": QUESTIONS["durable"]})


def test_not_configured() -> None:
    with pytest.raises(NotConfigured, match="not configured"):
        SystemOneClient("").ask(STATE, {"durable": QUESTIONS["durable"]})
    with pytest.raises(NotConfigured):
        EmbeddingsClient("", model="m").embed_query("x")
    with pytest.raises(NotConfigured):
        ChatClient("").complete([{"role": "user", "content": "hi"}])


# -- TLS -------------------------------------------------------------------------------------


def _count_ssl_contexts(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> list[int]:
    """Counts (or, with ``fail``, forbids) every SSLContext built from now on: stdlib hook."""
    import ssl

    made: list[int] = []
    original = ssl.SSLContext.__new__

    def counting(cls: type[ssl.SSLContext], *args: object, **kwargs: object) -> ssl.SSLContext:
        if fail:
            raise AssertionError("an SSL context was built for a plain http:// endpoint")
        made.append(1)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "__new__", counting)
    return made


def test_http_endpoints_build_no_ssl_context(semif: FakeSystemOne, embed: FakeEmbeddings,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _count_ssl_contexts(monkeypatch, fail=True)
    for _ in range(2):  # as two remembers would
        assert SystemOneClient(semif.url).ask(STATE, {"durable": QUESTIONS["durable"]})["durable"].p > 0
        assert len(EmbeddingsClient(embed.url).embed_query("x")) == 64
    assert list_models(semif.url, "", 5) == ["fake-semif"]


def test_https_endpoints_share_one_ssl_context(monkeypatch: pytest.MonkeyPatch) -> None:
    from realmem.clients import _http

    monkeypatch.setattr(_http, "_ssl_contexts", {})  # start without the process's context
    made = _count_ssl_contexts(monkeypatch)
    for _ in range(3):  # nothing listens on port 1: the client is built, the connection refused
        with pytest.raises(EndpointUnavailable, match="unreachable"):
            SystemOneClient("https://127.0.0.1:1", model="m").ask(STATE, {"durable": QUESTIONS["durable"]})
    assert len(made) == 1
    assert _http.shared_ssl_context() is _http.shared_ssl_context()


def test_ssl_cert_file_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import certifi

    from realmem.clients._http import shared_ssl_context

    bundle = Path(certifi.where()).read_text(encoding="ascii")
    end = "-----END CERTIFICATE-----"
    one_ca = tmp_path / "corporate-ca.pem"
    one_ca.write_text(bundle[bundle.index("-----BEGIN CERTIFICATE-----"):bundle.index(end) + len(end)] + "\n",
                      encoding="ascii")
    monkeypatch.setenv("SSL_CERT_FILE", str(one_ca))
    assert shared_ssl_context().cert_store_stats()["x509_ca"] == 1  # that file's CA, not certifi's
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    assert shared_ssl_context().cert_store_stats()["x509_ca"] > 1


# -- choice sharding -------------------------------------------------------------------------


def test_shard_choice_balances_and_keeps_none() -> None:
    options = {f"id{i}": f"n{i}" for i in range(17)} | {"none": "no match"}
    shards = shard_choice(options, 16)
    assert [len(s) for s in shards] == [10, 9]
    assert all(list(s)[-1] == "none" for s in shards)
    first = shard_choice({"none": "no match", "a": "x", "b": "y", "c": "z"}, 3)
    assert [list(s) for s in first] == [["none", "a", "b"], ["none", "c"]]
    assert shard_choice({"none": "no match"}, 4) == []
    with pytest.raises(ValueError):
        shard_choice({"a": "x"}, 4)


@given(st.integers(min_value=1, max_value=60), st.integers(min_value=2, max_value=20))
def test_shard_choice_covers_every_option_once(count: int, max_options: int) -> None:
    options = {f"id{i}": str(i) for i in range(count)} | {"none": "none"}
    shards = shard_choice(options, max_options)
    seen = [k for shard in shards for k in shard if k != "none"]
    assert seen == [f"id{i}" for i in range(count)]
    assert all("none" in s and 2 <= len(s) <= max_options for s in shards)
    assert max(len(s) for s in shards) - min(len(s) for s in shards) <= 1


def test_combine_choice_picks_the_best_real_option() -> None:
    a = ChoiceAnswer("none", {"x": 0.05, "none": 0.95}, 0.9, raw={"shard": 1})
    b = ChoiceAnswer("y", {"y": 0.8, "z": 0.1, "none": 0.1}, 0.6, raw={"shard": 2})
    combined = combine_choice([a, b])
    assert combined.choice == "y" and combined.p == 0.8 and combined.confidence == 0.6
    assert combined.probabilities == {"x": 0.05, "y": 0.8, "z": 0.1, "none": 0.1}
    assert combined.raw["combined_from"] == [{"shard": 1}, {"shard": 2}]
    nothing = combine_choice([a, ChoiceAnswer("none", {"y": 0.2, "none": 0.8}, 0.5)])
    assert nothing.choice == "none" and nothing.p == 0.8
    assert combine_choice([b]) is b


def test_sharded_choice_end_to_end(semif: FakeSystemOne) -> None:
    semif.configure(max_options=8)
    options = {f"id{i:02d}": f"neighbour {i}" for i in range(20)} | {"none": "none of them"}
    client = SystemOneClient(semif.url, max_options=8)
    shards = shard_choice(options, client.max_options)
    questions = {f"covered_by#{i}": Question("choice", "which?", shard) for i, shard in enumerate(shards)}
    semif.script({name: {"choice": "id13", "p": 0.85} for name in questions})
    answers = client.ask("state", questions)
    combined = combine_choice([answers.choice(name) for name in questions])
    assert len(shards) == 3 and combined.choice == "id13" and combined.p == pytest.approx(0.85)


# -- embeddings ------------------------------------------------------------------------------


def test_embeddings_happy_path_with_prefixes(embed: FakeEmbeddings) -> None:
    client = EmbeddingsClient(embed.url, model="(auto)", query_prefix="query: ", document_prefix="passage: ")
    docs = client.embed_documents(["pnpm test:e2e needs docker", "the cat sat on the mat"])
    query = client.embed_query("how to run e2e tests with pnpm and docker")
    assert len(docs) == 2 and len(query) == 64 and client.dimensions == 64
    assert _cosine(query, docs[0]) > _cosine(query, docs[1])
    inputs = [r.body["input"] for r in _posts(embed, "/v1/embeddings")]
    assert inputs == [["passage: pnpm test:e2e needs docker", "passage: the cat sat on the mat"],
                      ["query: how to run e2e tests with pnpm and docker"]]
    assert docs[0] == pytest.approx(fake_embedding("passage: pnpm test:e2e needs docker"))


def test_embeddings_batches_and_keeps_order(embed: FakeEmbeddings) -> None:
    embed.configure(reverse=True)
    texts = [f"text number {i}" for i in range(150)]
    vectors = EmbeddingsClient(embed.url, model="fake-embed").embed_documents(texts)
    assert [len(r.body["input"]) for r in _posts(embed, "/v1/embeddings")] == [64, 64, 22]
    assert vectors == [pytest.approx(fake_embedding(t)) for t in texts]
    assert EmbeddingsClient(embed.url, model="fake-embed").embed_documents([]) == []


def test_embeddings_scripted_vector(embed: FakeEmbeddings) -> None:
    embed.configure(dims=3)
    embed.script({"exact": [1.0, 0.0, 0.0]})
    client = EmbeddingsClient(embed.url, model="fake-embed")
    assert client.embed_documents(["exact", "other"])[0] == [1.0, 0.0, 0.0]


def test_fingerprint_tracks_endpoint_model_and_dimensions(embed: FakeEmbeddings) -> None:
    embed.configure(models=["m1", "m2"])
    first = EmbeddingsClient(embed.url, model="m1")
    fp = first.fingerprint()  # probes once to learn the dimensions
    assert [r.body["input"] for r in _posts(embed, "/v1/embeddings")] == [["probe"]]
    assert fp == first.fingerprint() == EmbeddingsClient(embed.url, model="m1").fingerprint()
    assert EmbeddingsClient(embed.url, model="m2").fingerprint() != fp
    embed.configure(dims=32)
    resized = EmbeddingsClient(embed.url, model="m1")
    assert resized.dimensions == 32 and resized.fingerprint() != fp
    with FakeEmbeddings(models=["m1"]) as elsewhere:
        assert EmbeddingsClient(elsewhere.url, model="m1").fingerprint() != fp


def test_dimension_change_mid_life_is_an_error(embed: FakeEmbeddings) -> None:
    client = EmbeddingsClient(embed.url, model="fake-embed")
    client.embed_query("a")
    embed.configure(dims=16)
    with pytest.raises(EndpointError, match="dimensions changed from 64 to 16"):
        client.embed_query("b")


def test_embeddings_bad_key(embed: FakeEmbeddings) -> None:
    embed.configure(key="right")
    with pytest.raises(EndpointError, match=r"^authentication failed \(401\)") as info:
        EmbeddingsClient(embed.url, key=SECRET, model="fake-embed").embed_query("x")
    assert SECRET not in str(info.value)


# -- chat ------------------------------------------------------------------------------------


def test_chat_complete_scripted(chat: FakeChat) -> None:
    chat.script(["first reply", "second reply"])
    client = ChatClient(chat.url, model="(auto)")
    messages = [{"role": "system", "content": "You rewrite facts."}, {"role": "user", "content": "hello"}]
    assert client.complete(messages, max_tokens=50) == "first reply"
    assert client.complete(messages, temperature=0.3) == "second reply"
    posts = _posts(chat, "/v1/chat/completions")
    assert posts[0].body == {"model": "fake-chat", "messages": messages, "temperature": 0.0, "max_tokens": 50}
    assert posts[1].body["temperature"] == 0.3 and "max_tokens" not in posts[1].body
    assert client.complete(messages) == "hello"  # queue drained: the heuristic echoes


def test_chat_json_with_fences_and_prose(chat: FakeChat) -> None:
    chat.script(['Sure!\n```json\n{"caption": "C", "content": "T {x}"}\n```\nDone.',
                 'Here it is: {"a": [1, 2]} and more {"b": 2}',
                 "I cannot do that."])
    client = ChatClient(chat.url, model="fake-chat")
    ask = [{"role": "user", "content": "Answer in JSON"}]
    assert client.complete_json(ask) == {"caption": "C", "content": "T {x}"}
    assert client.complete_json(ask) == {"a": [1, 2]}
    with pytest.raises(EndpointError, match="no JSON object"):
        client.complete_json(ask)


def test_extract_json_object_edge_cases() -> None:
    assert extract_json_object('```\n{"k": 1}\n```') == {"k": 1}
    assert extract_json_object('{"broken": \n then {"ok": true}') == {"ok": True}
    with pytest.raises(EndpointError):
        extract_json_object("[1, 2, 3]")


def test_chat_heuristic_json_merges_texts(chat: FakeChat) -> None:
    prompt = ("Merge the two facts. Reply with JSON {caption, content}.\n"
              "TARGET\nCaption: Tests use jest\nContent: Run jest in packages/a.\n"
              "NEW FACT\nCaption: Tests use jest with coverage\nContent: Add --coverage in CI.\n")
    reply = ChatClient(chat.url, model="fake-chat").complete_json([{"role": "user", "content": prompt}])
    assert reply == {"caption": "Tests use jest with coverage",
                     "content": "Run jest in packages/a.\n\nAdd --coverage in CI."}


def test_chat_from_config_prefers_rewriter_then_bridge(chat: FakeChat, tmp_path: Path) -> None:
    chat.configure(key="bridge-token", any_model=True)
    cfg = Config(tmp_path)
    bridged = ChatClient.from_config(cfg, bridge=(chat.url, "bridge-token"))
    assert bridged.url == chat.url and bridged.model == BRIDGE_MODEL
    chat.script("from the bridge")
    assert bridged.complete([{"role": "user", "content": "x"}]) == "from the bridge"
    assert chat.requests[-1].headers["authorization"] == "Bearer bridge-token"
    assert not ChatClient.from_config(cfg).configured
    cfg.set("rewriter.url", "http://127.0.0.1:9")
    cfg.set("rewriter.model", "gpt-x")
    own = ChatClient.from_config(cfg, bridge=(chat.url, "bridge-token"))
    assert own.url == "http://127.0.0.1:9" and own.model == "gpt-x"


# -- fakes -----------------------------------------------------------------------------------


def test_build_answer_shapes() -> None:
    choice = build_answer({"type": "choice", "criteria": {"a": "x", "b": "y", "none": "z"}}, {"choice": "q", "p": 0.7})
    assert choice["choice"] == "none"  # not offered: answered as none
    assert sum(choice["probabilities"].values()) == pytest.approx(1.0)
    score = build_answer({"type": "score", "criteria": ["low", "mid", "high"]}, 0.25)
    assert score["score"] == pytest.approx(0.5) and score["legend"] == {"0": "low", "1": "mid", "2": "high"}
    assert build_answer({"type": "noul"}, 0.3)["noul"] == 0.3


def test_fake_control_routes_in_process(semif: FakeSystemOne) -> None:
    assert httpx.post(semif.url + "/_control/script", json={"durable": {"noul": 0.33}}).status_code == 200
    assert httpx.post(semif.url + "/_control/fail", json={"status": 503, "retry_after": 2}).status_code == 200
    client = SystemOneClient(semif.url, model="fake-semif")
    with pytest.raises(EndpointUnavailable):
        client.ask(STATE, {"durable": QUESTIONS["durable"]})
    assert client.ask(STATE, {"durable": QUESTIONS["durable"]})["durable"].p == 0.33
    recorded = httpx.get(semif.url + "/_control/requests").json()["requests"]
    assert [r["path"] for r in recorded] == ["/v1/systemone", "/v1/systemone"]
    assert httpx.post(semif.url + "/_control/configure", json={"nope": 1}).status_code == 400
    assert httpx.post(semif.url + "/_control/reset").status_code == 200
    assert semif.requests == []


@pytest.fixture
def fake_process() -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    proc = subprocess.Popen([sys.executable, "-m", "realmem.fakes", "--semif", "--embeddings", "--chat"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    urls: dict[str, str] = {}
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "ready":
                break
            kind, url = line.split()
            urls[kind] = url
        else:
            pytest.fail(f"fake process exited early: {proc.stderr.read() if proc.stderr else ''}")
        yield proc, urls
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_cross_process_scripting(fake_process: tuple[subprocess.Popen[str], dict[str, str]]) -> None:
    proc, urls = fake_process
    assert set(urls) == {"semif", "embeddings", "chat"}
    httpx.post(urls["semif"] + "/_control/script",
               json={"covered_by": {"choice": "AZJrPmEw1-8Vr0xkmp2Bqw", "p": 0.66}}).raise_for_status()
    httpx.post(urls["chat"] + "/_control/script", json={"replies": ["scripted across processes"]}).raise_for_status()
    httpx.post(urls["embeddings"] + "/_control/fail", json={"status": 503, "retry_after": 3}).raise_for_status()

    answers = SystemOneClient(urls["semif"]).ask(STATE, QUESTIONS)
    assert answers["covered_by"].choice == "AZJrPmEw1-8Vr0xkmp2Bqw" and answers["covered_by"].p == 0.66
    assert ChatClient(urls["chat"]).complete([{"role": "user", "content": "x"}]) == "scripted across processes"
    with pytest.raises(EndpointUnavailable) as info:
        EmbeddingsClient(urls["embeddings"], model="fake-embed").embed_query("x")
    assert info.value.retry_after == 3
    recorded = httpx.get(urls["semif"] + "/_control/requests").json()["requests"]
    assert [r["path"] for r in recorded] == ["/v1/models", "/v1/systemone"]

    proc.terminate()
    assert proc.wait(timeout=30) == 0


# -- a 401 names the key setting ------------------------------------------------------------------


def test_401_names_the_setting_and_whether_its_variable_is_set(home: Path, semif: FakeSystemOne, embed: FakeEmbeddings,
                                                              chat: FakeChat, monkeypatch: pytest.MonkeyPatch) -> None:
    for server in (semif, embed, chat):
        server.configure(key="the-right-key")
    cfg = Config(home)
    cfg.set("semif.url", semif.url)
    cfg.set("semif.model", "fake-semif")
    cfg.set("semif.key", "$RM_TEST_SEMIF_KEY")
    cfg.set("embedding.url", embed.url)
    cfg.set("embedding.model", "fake-embed")
    cfg.set("embedding.key", "env:RM_TEST_EMBED_KEY")
    cfg.set("rewriter.url", chat.url)
    cfg.set("rewriter.model", "fake-chat")
    cfg.set("rewriter.key", SECRET)
    monkeypatch.delenv("RM_TEST_SEMIF_KEY", raising=False)
    monkeypatch.delenv("RM_TEST_EMBED_KEY", raising=False)

    def failure(call) -> str:  # type: ignore[no-untyped-def]
        with pytest.raises(EndpointError) as info:
            call()
        assert info.value.status == 401
        return str(info.value)

    ask = lambda: SystemOneClient.from_config(cfg).ask(STATE, {"durable": QUESTIONS["durable"]})  # noqa: E731
    assert failure(ask) == (f"authentication failed (401) for {semif.url}/v1/systemone: semif.key is "
                            "$RM_TEST_SEMIF_KEY, but RM_TEST_SEMIF_KEY is not set in realmem's environment")
    monkeypatch.setenv("RM_TEST_SEMIF_KEY", SECRET)
    message = failure(ask)
    assert message.endswith("semif.key is $RM_TEST_SEMIF_KEY; RM_TEST_SEMIF_KEY is set, but the server refused its value")
    assert SECRET not in message
    assert failure(lambda: EmbeddingsClient.from_config(cfg).embed_query("x")).endswith(
        "embedding.key is env:RM_TEST_EMBED_KEY, but RM_TEST_EMBED_KEY is not set in realmem's environment")
    message = failure(lambda: ChatClient.from_config(cfg).complete([{"role": "user", "content": "hi"}]))
    assert message.endswith(": check rewriter.key") and SECRET not in message
    cfg.unset("rewriter.key")
    assert failure(lambda: ChatClient.from_config(cfg).complete([{"role": "user", "content": "hi"}])).endswith(
        ": rewriter.key is not set; set it with realmem settings set rewriter.key VALUE")
    monkeypatch.setenv("REALMEM_SEMIF_KEY", "$RM_OTHER")
    monkeypatch.delenv("RM_OTHER", raising=False)
    assert failure(ask).endswith("semif.key is $RM_OTHER (from REALMEM_SEMIF_KEY), but RM_OTHER is not set in "
                                 "realmem's environment")
    # the model picker and the connectivity test say the same
    from realmem.interface.settings import list_endpoint_models, test_endpoints
    assert failure(lambda: list_endpoint_models(cfg, "embedding")).endswith("RM_TEST_EMBED_KEY is not set in "
                                                                              "realmem's environment")
    results = {r["endpoint"]: r["message"] for r in test_endpoints(cfg)}
    assert "semif.key is $RM_OTHER" in results["semif"] and "embedding.key is env:" in results["embedding"]


def test_a_refused_bridge_token_says_so(chat: FakeChat, home: Path) -> None:
    chat.configure(key="the-right-token")
    client = ChatClient.from_config(Config(home), (chat.url, "stale-token"))
    with pytest.raises(EndpointError) as info:
        client.complete([{"role": "user", "content": "hi"}])
    assert str(info.value).endswith("the Pi model bridge refused realmem's token; restart Pi (or set rewriter.url)")
