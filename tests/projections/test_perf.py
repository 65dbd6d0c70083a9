"""The fast paths added for performance agree with the slow paths they stand in for."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from realmem.projections import tokenize
from realmem.stores import ids
from realmem.projections import files

TIMES = st.one_of(
    st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"),
    st.text(max_size=30),
)
ONE_LINE = st.text(max_size=40)
UUIDS = st.uuids().map(str)


@settings(max_examples=400, deadline=None)
@given(mem_id=UUIDS, caption=st.text(min_size=1, max_size=60), paths=st.lists(ONE_LINE, max_size=4),
       created=TIMES, updated=TIMES, content=st.text(max_size=80))
def test_rendered_frontmatter_fast_path_agrees_with_ruamel(mem_id, caption, paths, created, updated, content):
    text = files.render(id=mem_id, caption=caption, paths=paths, created=created, updated=updated, content=content)
    front, body, first = files.split(text)
    fast = files.parse_canonical(front, body)
    try:
        slow = files.parse_yaml(front, body, first)
    except files.FactFileError:
        slow = None
    if fast is not None:
        assert fast == slow


@settings(max_examples=400, deadline=None)
@given(mem_id=st.one_of(UUIDS, ONE_LINE), caption=ONE_LINE, paths=st.one_of(st.none(), st.lists(ONE_LINE, max_size=3)),
       created=st.one_of(TIMES, ONE_LINE), updated=st.one_of(TIMES, ONE_LINE))
def test_hand_written_frontmatter_fast_path_agrees_with_ruamel(mem_id, caption, paths, created, updated):
    """Raw values (not quoted by render): whenever the fast path accepts, ruamel reads the same."""
    if any("\n" in v or "\r" in v for v in [mem_id, caption, created, updated, *(paths or [])]):
        return
    lines = [f"id: {mem_id}", f"caption: {caption}"]
    lines += ["paths: []"] if paths is None else ["paths:", *(f"  - {p}" for p in paths)]
    lines += [f"created: {created}", f"updated: {updated}"]
    front = "\n".join(lines)
    fast = files.parse_canonical(front, "\nbody\n")
    if fast is None:
        return
    assert files.parse_yaml(front, "\nbody\n", 2) == fast


def test_fast_path_is_taken_for_what_realmem_writes():
    mem_id = ids.new_id()
    text = files.render(id=mem_id, caption="Use: uv, not pip #1", paths=["src/app.py", "**/*.sql"],
                        created="2026-01-02T03:04:05.678Z", updated="2026-01-02T03:04:05.678Z",
                        content="Run `uv sync`.")
    front, body, first = files.split(text)
    fast = files.parse_canonical(front, body)
    assert fast is not None and fast == files.parse_yaml(front, body, first) == files.parse(text)
    # A hand-added key is not the canonical shape: ruamel reads it.
    with_extra = text.replace("updated:", "owner: me\nupdated:")
    front, body, _ = files.split(with_extra)
    assert files.parse_canonical(front, body) is None
    assert files.parse(with_extra).caption == "Use: uv, not pip #1"


def _icu_tokens(text: str) -> list[str]:
    out: list[str] = []
    for match in tokenize._CHUNK.finditer(tokenize._normalise(text)):
        cjk, other = match.groups()
        if cjk is not None:
            out.extend(tokenize._cjk_tokens(cjk, unigrams=True))
        else:
            for segment in tokenize._word_segments(other):
                out.extend(tokenize._word_tokens(segment))
    return out


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=120))
def test_ascii_tokenizer_fast_path_agrees_with_icu(text):
    assert tokenize.index_tokens(text) == _icu_tokens(text)


def test_status_imports_no_heavy_library(tmp_path):
    """`realmem status` never loads ICU, Huey, httpx, ruamel or the tokenizer's deps."""
    code = ("import sys, runpy\n"
            "sys.argv = ['realmem', '--home', sys.argv[1], '--cwd', sys.argv[2], 'status']\n"
            "try:\n    runpy.run_module('realmem.interface.cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('icu', 'huey', 'httpx', 'ruamel'))), file=sys.stderr)\n")
    (tmp_path / "proj").mkdir()
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "home"), str(tmp_path / "proj")],
                         capture_output=True, text=True, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert out.stderr.strip().splitlines()[-1:] in ([], [""]), out.stderr


def test_counter_events_fast_path_matches_replay(home, repo):
    """Recall hits, path-note counts and reinforcements take a one-UPDATE path: the counters
    it writes are exactly what replaying the log computes."""
    from realmem.write import memories
    from realmem.app import Realmem
    from realmem.events import types as ev
    from realmem.projections import replay

    with Realmem.open(home, repo) as app:
        store = app.project.shared_store  # type: ignore[union-attr]
        a = memories.add(app, "Use uv", "Run uv sync.", store=store, stored_paths=["."], source="add")
        b = memories.add(app, "Lint with ruff", "Run ruff check.", store=store, stored_paths=["."], source="add")
        ka, kb = (store, a.id), (store, b.id)
        app.emit([ev.RecallHit([ka, kb, ka, (store, ids.new_id())])])
        app.emit([ev.PathNotesShown([kb], ["src/a.py"], "read"), ev.Reinforced(store, b.id)])
        fast = {ka: app.counters(ka), kb: app.counters(kb)}
        assert fast == {ka: (2, 0), kb: (2, 1)}
        assert app.projection_seq("files") == app.projection_seq("tables")
        replay.replay(app)
        assert {ka: app.counters(ka), kb: app.counters(kb)} == fast


def test_open_skips_an_unchanged_large_store_and_session_start_sees_in_place_edits(home, repo, monkeypatch):
    from realmem.write import observe
    from realmem.app import Realmem

    monkeypatch.setattr(observe, "QUICK_OPEN_FILES", 1)  # two files count as a large store here
    monkeypatch.setattr(observe, "_RACY_NS", 0)
    with Realmem.open(home, repo) as app:
        store = app.project.shared_store  # type: ignore[union-attr]
        d = app.store_dir(store)
    d.mkdir(parents=True, exist_ok=True)
    texts = {}
    for i in range(2):
        mem_id = ids.new_id()
        texts[mem_id] = files.render(id=mem_id, caption=f"Fact {i}", paths=["."], created="2026-01-01T00:00:00.000Z",
                                     updated="2026-01-01T00:00:00.000Z", content=f"Body {i}.")
        (d / f"fact-{i}.md").write_text(texts[mem_id], encoding="utf-8")
    with Realmem.open(home, repo) as app:  # the directory changed: scanned
        assert app.conn.execute("SELECT count(*) FROM memories WHERE store=?", (store,)).fetchone()[0] == 2
    # An in-place edit keeps the directory's mtime: a quick open does not stat the file...
    first = d / "fact-0.md"
    first.write_text(first.read_text(encoding="utf-8").replace("Body 0.", "Edited in place."), encoding="utf-8")
    with Realmem.open(home, repo) as app:
        assert app.conn.execute("SELECT count(*) FROM memories WHERE content LIKE 'Edited%'").fetchone()[0] == 0
        # ...but a file added next to it changes the directory, and the next open sees both.
    third = ids.new_id()
    (d / "fact-2.md").write_text(files.render(id=third, caption="Fact 2", paths=["."], created="2026-01-01T00:00:00.000Z",
                                              updated="2026-01-01T00:00:00.000Z", content="Body 2."), encoding="utf-8")
    with Realmem.open(home, repo) as app:
        assert app.conn.execute("SELECT count(*) FROM memories WHERE store=?", (store,)).fetchone()[0] == 3
        assert app.conn.execute("SELECT count(*) FROM memories WHERE content LIKE 'Edited%'").fetchone()[0] == 1
    first.write_text(first.read_text(encoding="utf-8").replace("Edited in place.", "Edited again."), encoding="utf-8")
    with Realmem.open(home, repo, scan=False) as app:  # session start scans in full
        observe.scan_stores(app)
        assert app.conn.execute("SELECT count(*) FROM memories WHERE content LIKE 'Edited again%'").fetchone()[0] == 1


BENCH_ROWS = {"status cold p50", "first prompt wait", "observe", "recall over rpc, hits counted, p50",
              "recall over rpc, hits counted, p95", "store open p95", "remember gate overhead p95", "rpc child peak RSS",
              "worker peak RSS", "path-note hook over rpc p95", "Claude Code hook p95", "MCP recall over stdio p95",
              "recall in process p95", "replay", "first replay (tokenizes every fact)", "rpc child ready"}


def test_bench_quick_reports_every_row(tmp_path):
    """`realmem bench --quick` runs end to end; its table and --json give every row with a
    figure, the floor where the row has one, and the ratio where it has a target."""
    import json
    env = {**__import__("os").environ, "REALMEM_HOME": str(tmp_path / "home"), "REALMEM_WORKER_AUTOSTART": "0"}
    out = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "bench", "--quick", "--sizes", "300", "--json"],
                         capture_output=True, text=True, env=env, timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    names = {r["row"].split(" 4")[0] if r["row"].startswith(("observe", "first prompt")) else r["row"] for r in data["rows"]}
    names = {n.rstrip(",") for n in names}
    assert {n for n in BENCH_ROWS if not any(x.startswith(n) for x in names)} == set()
    for r in data["rows"]:
        assert r["memories"] == 300 and isinstance(r["measured"], (int, float)) and r["measured"] >= 0
        assert (r["ratio"] is None) == (r["target"] is None)
    by_name = {r["row"]: r for r in data["rows"]}
    assert by_name["status cold p50"]["floor"] > 0 and by_name["recall over rpc, hits counted, p95"]["floor"] > 0
    assert next(r for r in data["rows"] if r["row"].startswith("observe"))["floor"] > 0
    fp = data["results"][0]["first_prompt"]
    assert fp["in_background"] == fp["files"]  # past the threshold: read in the background
    from realmem.interface.bench import render
    text = render(data["results"])
    for r in data["rows"]:
        assert r["row"] in text


def test_scan_command_reads_an_in_place_edit(home, repo):
    """`realmem scan` (what session start runs for a large backlog) reads what a quick open
    may skip: an edit written in place."""
    from realmem.write import memories
    from realmem.app import Realmem

    with Realmem.open(home, repo) as app:
        store = app.project.shared_store  # type: ignore[union-attr]
        m = memories.add(app, "Use uv", "Run uv sync.", store=store, stored_paths=["."], source="add")
        path = app.store_dir(store) / m.file
    path.write_text(path.read_text(encoding="utf-8").replace("Run uv sync.", "Run uv sync --frozen."), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "--cwd", str(repo), "scan"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1 change recorded."
    with Realmem.open(home, repo, scan=False) as app:
        assert app.memory((store, m.id)).content == "Run uv sync --frozen."  # type: ignore[union-attr]
