"""The fast paths added for performance agree with the slow paths they stand in for."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import string
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import realmem
from realmem.projections import tokenize
from realmem.stores import ids, project
from realmem.projections import files
from conftest import make_repo, run_git

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
    # A teammate's hand-written fact: the same frontmatter without its id line.
    bare = "\n".join(front.split("\n")[1:])
    fast = files.parse_canonical(bare, body)
    try:
        slow = files.parse_yaml(bare, body, first)
    except files.FactFileError:
        slow = None
    if fast is not None:
        assert fast.id is None and fast == slow


@settings(max_examples=200, deadline=None)
@given(mem_id=UUIDS, caption=st.text(min_size=1, max_size=40), paths=st.lists(ONE_LINE, max_size=3),
       created=TIMES, content=st.text(max_size=40), drop_id=st.booleans(),
       extra=st.one_of(st.none(), st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=8)))
def test_rewrite_keeps_what_ruamel_finds_beyond_realmems_keys(mem_id, caption, paths, created, content, drop_id, extra):
    """``render(previous=...)`` skips YAML when the previous text is canonical: the kept keys
    are byte for byte those ruamel's round trip keeps."""
    text = files.render(id=mem_id, caption=caption, paths=paths, created=created, updated=created, content=content)
    if extra is not None and extra not in files.OWN_KEYS:
        text = text.replace("\nupdated:", f"\n{extra}: kept\nupdated:", 1)
    if drop_id:
        text = "---\n" + text.split("\n", 2)[2]
    new = files.render(id=mem_id, caption=caption, paths=paths, created=created, updated=created, content=content,
                       previous=text)
    front, _, first = files.split(text)
    try:
        data = files._load(front, first)
    except files.FactFileError:
        return  # not YAML at all: nothing is kept either way
    if not isinstance(data, dict):
        return
    for key in files.OWN_KEYS:
        data.pop(key, None)
    if data:
        import io
        buf = io.StringIO()
        files._yaml().dump(data, buf)
        kept = buf.getvalue()
    else:
        kept = ""
    head = files.render(id=mem_id, caption=caption, paths=paths, created=created, updated=created, content=content)
    assert new == head.replace("\n---\n", "\n" + kept + "---\n", 1) if kept else new == head


@settings(max_examples=400, deadline=None)
@given(mem_id=st.one_of(UUIDS, ONE_LINE, st.just("")), caption=ONE_LINE, paths=st.one_of(st.none(), st.lists(ONE_LINE, max_size=3)),
       created=st.one_of(TIMES, ONE_LINE), updated=st.one_of(TIMES, ONE_LINE))
def test_hand_written_frontmatter_fast_path_agrees_with_ruamel(mem_id, caption, paths, created, updated):
    """Raw values (not quoted by render), with or without an id line (``mem_id`` ""): whenever
    the fast path accepts, ruamel reads the same."""
    if any("\n" in v or "\r" in v for v in [mem_id, caption, created, updated, *(paths or [])]):
        return
    lines = [f"caption: {caption}"] if mem_id == "" else [f"id: {mem_id}", f"caption: {caption}"]
    lines += ["paths: []"] if paths is None else ["paths:", *(f"  - {p}" for p in paths)]
    lines += [f"created: {created}", f"updated: {updated}"]
    front = "\n".join(lines)
    fast = files.parse_canonical(front, "\nbody\n")
    if fast is None:
        return
    assert files.parse_yaml(front, "\nbody\n", 2) == fast


@pytest.mark.parametrize("caption", ["=", "<<"])
def test_yaml_value_and_merge_keys_are_quoted_and_read_back_alike(caption):
    """Plain, ruamel reads these as YAML's value and merge keys, not as the caption."""
    text = files.render(id=str(uuid.UUID(int=1)), caption=caption, paths=[], created="2000-01-01T00:00:00.000Z",
                        updated="2000-01-01T00:00:00.000Z", content="x")
    front, body, first = files.split(text)
    assert files.parse_canonical(front, body) == files.parse_yaml(front, body, first)
    assert files.parse(text).caption == caption


def _split_by_lines(text):
    """``files.split`` as the spec reads: the first line and the next line that are '---'."""
    lines = text.removeprefix("\ufeff").split("\n")
    if lines[0].rstrip() != files.FRONT:
        return "missing"
    closing = next((i for i in range(1, len(lines)) if lines[i].rstrip() == files.FRONT), None)
    return "unclosed" if closing is None else ("\n".join(lines[1:closing]), "\n".join(lines[closing + 1:]), 2)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["---", "----", "--", "\n", " ", "\t", "\r", "\u2028", "\ufeff", "x: 1", "a"]),
                max_size=30).map("".join))
def test_split_finds_the_frontmatter_lines(text):
    try:
        got = files.split(text)
    except files.FactFileError as exc:
        got = "missing" if "missing frontmatter" in str(exc) else "unclosed"
    assert got == _split_by_lines(text)


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
    for match in tokenize._chunk().finditer(tokenize._normalise(text)):
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


# Libraries `realmem status` never needs: loading any of them is start-up time spent for nothing
# (subprocess and tempfile: a status answered from its caches spawns and writes nothing).
HEAVY = ("icu", "huey", "httpx", "ruamel", "sqlite_vec", "mcp", "cattrs", "structlog", "asyncio", "difflib",
         "subprocess", "tempfile")


def test_status_imports_no_heavy_library_and_spawns_no_git(tmp_path, repo):
    """`realmem status` in a real git repository, once its stores are registered, never loads
    ICU, Huey, httpx, ruamel, sqlite-vec, mcp, cattrs or structlog (nothing is logged at the
    default level), subprocess or tempfile, nor makes the event classes or compiles the
    tokenizer's patterns, and with the root commit and the gitignore answer cached in REALMEM_HOME it
    spawns no git process at all."""
    code = ("import sys, runpy\n"
            "sys.argv = ['realmem', '--home', sys.argv[1], '--cwd', sys.argv[2], 'status']\n"
            "try:\n    runpy.run_module('realmem.interface.cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            # Nor does it make the event classes: it appends nothing.
            f"print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} "
            "or m == 'realmem.events.catalog')), file=sys.stderr)\n"
            # The tokenizer's patterns are compiled on first use: status tokenizes nothing.
            "tk = sys.modules.get('realmem.projections.tokenize')\n"
            "assert tk is None or not any(f.cache_info().currsize for f in (tk._word, tk._chunk, tk._hiragana))\n")
    # A git on PATH that notes each call and runs the real one.
    shim = tmp_path / "bin"
    shim.mkdir()
    calls = tmp_path / "git-calls"
    real_git = shutil.which("git")
    (shim / "git").write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\nexec "{real_git}" "$@"\n', encoding="utf-8")
    (shim / "git").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}:/usr/bin:/bin"}

    def status() -> str:
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "home"), str(repo / "src")],
                             capture_output=True, text=True, env=env)
        assert out.returncode == 0 and "Project " in out.stdout, out.stderr
        return out.stderr.strip().splitlines()[-1] if out.stderr.strip() else ""

    (repo / "src").mkdir()
    status()  # the first run registers the stores (events: cattrs) and asks git, caching its answers
    assert calls.exists()
    calls.unlink()
    assert status() == ""
    assert not calls.exists(), calls.read_text()
    # A wake-up waiting in the queue is counted without loading Huey.
    from realmem.jobs import queue
    assert queue.enqueue(tmp_path / "home", "embed")
    assert status() == ""
    shown = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(tmp_path / "home"), "--cwd",
                            str(repo), "status", "--json"], capture_output=True, text=True, env=env)
    assert json.loads(shown.stdout)["worker"]["pending_tasks"] == 1, shown.stderr
    # A rule added by hand is still seen at once (and costs git calls again).
    (repo / ".gitignore").write_text(".pi/\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(tmp_path / "home"), "--cwd", str(repo),
                          "status"], capture_output=True, text=True, env=env)
    assert "are ignored by git" in out.stdout, out.stdout + out.stderr


def test_recall_and_path_notes_modules_load_no_endpoint_client_nor_the_gate():
    """The rpc child's recall and path notes (tools, pathnotes) load neither httpx (no endpoint
    client is made until one is configured and called) nor the remember gate's rules."""
    code = ("import sys\n"
            "from realmem.interface import tools\n"
            "from realmem.read import pathnotes\n"
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'huey', 'ruamel', 'sqlite_vec')"
            " or m in ('realmem.gate.remember', 'realmem.gate.safety', 'realmem.gate.rules'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_no_module_imports_structlog_directly():
    """Every realmem module logs through ``logs.get_logger``, which loads structlog at the first
    line written with ``configure``'s settings in place; a direct `import structlog` could log
    before them (to stdout, which belongs to rpc)."""
    root = Path(realmem.__file__).parent
    direct = [str(p.relative_to(root)) for p in root.rglob("*.py")
              if str(p.relative_to(root)) not in ("logs.py", "fakes/__main__.py")  # they configure structlog
              and re.search(r"^\s*(import structlog|from structlog)", p.read_text(encoding="utf-8"), re.M)]
    assert direct == []


def test_lazy_logger_writes_structured_json_only_past_the_level(tmp_path):
    """A logger taken before `configure` writes JSON lines to the configured file, with
    secrets masked; a call below the level neither writes nor loads structlog."""
    code = ("import sys\n"
            "from pathlib import Path\n"
            "from realmem import logs\n"
            "log = logs.get_logger('realmem.test')\n"
            "logs.configure('warning', file=Path(sys.argv[1]))\n"
            "log.info('quiet', n=1)\n"
            "print('structlog' in sys.modules)\n"
            "log.warning('loud', api_key=sys.argv[2], n=2)\n"
            "print('structlog' in sys.modules)\n")
    secret = "sk-" + "".join(random.choices(string.ascii_letters + string.digits, k=40))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.log"), secret], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"] and out.stderr == ""
    lines = [json.loads(line) for line in (tmp_path / "x.log").read_text(encoding="utf-8").splitlines()]
    assert [(r["event"], r["level"], r["api_key"], r["n"]) for r in lines] == [("loud", "warning", "****", 2)]
    assert secret not in (tmp_path / "x.log").read_text(encoding="utf-8")


def _truth(cwd: Path) -> tuple[str, str]:
    """The root and key git itself gives for ``cwd``."""
    root = str(Path(run_git(cwd, "rev-parse", "--show-toplevel")).resolve())
    roots = subprocess.run(["git", "rev-list", "--max-parents=0", "HEAD"], cwd=cwd, capture_output=True, text=True)
    key = "git-" + sorted(roots.stdout.split())[0] if roots.returncode == 0 else project.path_key(Path(root))
    return root, key


def test_project_detection_from_files_agrees_with_git(tmp_path, home):
    """The work tree and root commit read from .git (and the per-HEAD cache) give what git
    gives: in a subdirectory, after commits, with packed refs, in a linked worktree, with two
    root commits, before the first commit, and with GIT_DIR set (git decides)."""
    main = make_repo(tmp_path / "main")
    (main / "a" / "b").mkdir(parents=True)

    def check(cwd: Path) -> None:
        for cache in (None, home, home):  # no cache, a cache miss, a cache hit
            project.forget_cache()
            # The key as computed, not as kept (tests/stores/test_project_key.py: a merge keeps it).
            (main / ".git" / project.KEY_FILE).unlink(missing_ok=True)
            p = project.detect(cwd, cache)
            assert (str(p.root), p.key, p.is_git) == (*_truth(cwd), True), cwd

    check(main / "a" / "b")
    (main / "c.txt").write_text("c\n", encoding="utf-8")
    run_git(main, "add", "c.txt")
    run_git(main, "commit", "-q", "-m", "c")
    run_git(main, "pack-refs", "--all")
    check(main)
    wt = tmp_path / "wt"
    run_git(main, "worktree", "add", "-q", "-b", "side", str(wt))
    check(wt)
    other = tmp_path / "other"  # an unrelated history whose files do not clash with main's
    other.mkdir()
    run_git(other, "init", "-q")
    (other / "o.txt").write_text("o\n", encoding="utf-8")
    run_git(other, "add", "o.txt")
    run_git(other, "commit", "-q", "-m", "o")
    run_git(main, "fetch", "-q", str(other), "HEAD")
    run_git(main, "merge", "-q", "--allow-unrelated-histories", "-m", "join", "FETCH_HEAD")
    check(main / "a")
    assert len(run_git(main, "rev-list", "--max-parents=0", "HEAD").split()) == 2
    unborn = tmp_path / "unborn"
    unborn.mkdir()
    run_git(unborn, "init", "-q")
    check(unborn)
    assert project.detect(unborn, home).key == project.path_key(unborn.resolve())
    os.environ["GIT_DIR"] = str(main / ".git")
    try:
        project.forget_cache()
        assert project.detect(tmp_path, home).root == main.resolve().parent  # git's answer: the cwd is the work tree
    finally:
        del os.environ["GIT_DIR"]
        project.forget_cache()
    outside = tmp_path / "outside"
    outside.mkdir()
    project.forget_cache()
    assert project.detect(outside, home) == project.Project(outside.resolve(), project.path_key(outside.resolve()), False)


def test_root_commit_cache_is_not_used_for_a_shallow_clone(tmp_path, home):
    """A shallow clone's root is its shallow boundary: git is asked, never a cached answer."""
    main = make_repo(tmp_path / "main")
    for i in range(2):
        (main / f"f{i}").write_text(f"{i}\n", encoding="utf-8")
        run_git(main, "add", f"f{i}")
        run_git(main, "commit", "-q", "-m", f"c{i}")
    project.forget_cache()
    full = project.detect(main, home).key
    shallow = tmp_path / "shallow"
    run_git(tmp_path, "clone", "-q", "--depth", "1", f"file://{main}", str(shallow))
    project.forget_cache()
    assert project.detect(shallow, home).key == _truth(shallow)[1] != full


def test_counter_events_fast_path_matches_replay(home, repo):
    """Recall hits, path-note counts and reinforcements take a one-UPDATE path: the counters
    it writes are exactly what replaying the log computes."""
    from realmem.write import memories
    from realmem.write.attached import open_attached
    from realmem.events import types as ev
    from realmem.projections import replay

    with open_attached(home, repo) as app:
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
    from realmem.write.attached import open_attached

    monkeypatch.setattr(observe, "QUICK_OPEN_FILES", 1)  # two files count as a large store here
    monkeypatch.setattr(observe, "_RACY_NS", 0)
    with open_attached(home, repo) as app:
        store = app.project.shared_store  # type: ignore[union-attr]
        d = app.store_dir(store)
    d.mkdir(parents=True, exist_ok=True)
    texts = {}
    for i in range(2):
        mem_id = ids.new_id()
        texts[mem_id] = files.render(id=mem_id, caption=f"Fact {i}", paths=["."], created="2026-01-01T00:00:00.000Z",
                                     updated="2026-01-01T00:00:00.000Z", content=f"Body {i}.")
        (d / f"fact-{i}.md").write_text(texts[mem_id], encoding="utf-8")
    with open_attached(home, repo) as app:  # the directory changed: scanned
        assert app.conn.execute("SELECT count(*) FROM memories WHERE store=?", (store,)).fetchone()[0] == 2
    # An in-place edit keeps the directory's mtime: a quick open does not stat the file...
    first = d / "fact-0.md"
    first.write_text(first.read_text(encoding="utf-8").replace("Body 0.", "Edited in place."), encoding="utf-8")
    with open_attached(home, repo) as app:
        assert app.conn.execute("SELECT count(*) FROM memories WHERE content LIKE 'Edited%'").fetchone()[0] == 0
        # ...but a file added next to it changes the directory, and the next open sees both.
    third = ids.new_id()
    (d / "fact-2.md").write_text(files.render(id=third, caption="Fact 2", paths=["."], created="2026-01-01T00:00:00.000Z",
                                              updated="2026-01-01T00:00:00.000Z", content="Body 2."), encoding="utf-8")
    with open_attached(home, repo) as app:
        assert app.conn.execute("SELECT count(*) FROM memories WHERE store=?", (store,)).fetchone()[0] == 3
        assert app.conn.execute("SELECT count(*) FROM memories WHERE content LIKE 'Edited%'").fetchone()[0] == 1
    first.write_text(first.read_text(encoding="utf-8").replace("Edited in place.", "Edited again."), encoding="utf-8")
    with open_attached(home, repo, scan=False) as app:  # session start scans in full
        # The backlog lists no unchanged large store first, yet still stats it when few files are new.
        assert observe.backlog(app) == 1
        observe.scan_stores(app)
        assert app.conn.execute("SELECT count(*) FROM memories WHERE content LIKE 'Edited again%'").fetchone()[0] == 1


def test_after_a_replay_an_open_records_the_large_stores_stamp_once_and_then_skips_it(home, repo, monkeypatch):
    """A replay resets file_stats: the next open stats the files (nothing changed) and keeps the
    directory's stamp, so the open after that does not stat a large store's files at all."""
    from realmem.projections import replay
    from realmem.write import memories, observe
    from realmem.write.attached import open_attached

    monkeypatch.setattr(observe, "QUICK_OPEN_FILES", 1)  # two files count as a large store here
    monkeypatch.setattr(observe, "_RACY_NS", 0)
    with open_attached(home, repo) as app:
        store = app.project.shared_store  # type: ignore[union-attr]
        for caption in ("Use uv", "Lint with ruff"):
            memories.add(app, caption, "Body.", store=store, stored_paths=["."], source="add")
        replay.replay(app)
    listed: list[str] = []
    real = observe.backlog

    def counted(app, stores=None):  # type: ignore[no-untyped-def]
        listed.extend(stores or [])
        return real(app, stores)

    monkeypatch.setattr(observe, "backlog", counted)
    with open_attached(home, repo):
        pass
    assert store in listed  # no stamp yet: the files were stat'ed, and nothing had changed
    listed.clear()
    with open_attached(home, repo):
        pass
    assert store not in listed


BENCH_ROWS = {"status cold p50", "first prompt wait", "observe", "recall over rpc, hits counted, p50",
              "recall over rpc, hits counted, p95", "store open p95", "remember gate overhead p95", "rpc child peak RSS",
              "worker peak RSS", "path-note hook over rpc p95", "Claude Code hook p95", "MCP recall over stdio p95",
              "recall in process p95", "replay", "first replay (tokenizes every fact)", "rpc child ready",
              "path notes with a freshness flag", "recall over rpc, local embedder, p50",
              "recall over rpc, local embedder, p95", "recall over rpc, local + System One check (fake), p95",
              "recall over rpc, local + chat check (fake), p95", "chat check: tokens per recall (fake's count)",
              "local embedder: 1,000 facts embedded", "rpc child peak RSS, model loaded"}


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
    from realmem.write.attached import open_attached

    with open_attached(home, repo) as app:
        store = app.project.shared_store  # type: ignore[union-attr]
        m = memories.add(app, "Use uv", "Run uv sync.", store=store, stored_paths=["."], source="add")
        path = app.store_dir(store) / m.file
    path.write_text(path.read_text(encoding="utf-8").replace("Run uv sync.", "Run uv sync --frozen."), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "--cwd", str(repo), "scan"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1 change recorded."
    with open_attached(home, repo, scan=False) as app:
        assert app.memory((store, m.id)).content == "Run uv sync --frozen."  # type: ignore[union-attr]


def test_bench_only_measures_the_groups_picked(tmp_path):
    """`realmem bench --only recall` measures recall (in process, the raw FTS5 floor, over rpc)
    and nothing else; an unknown group is refused with the list of groups."""
    import json
    env = {**__import__("os").environ, "REALMEM_HOME": str(tmp_path / "home"), "REALMEM_WORKER_AUTOSTART": "0"}
    out = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "bench", "--quick", "--sizes", "200",
                          "--only", "recall", "--json"], capture_output=True, text=True, env=env, timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    names = {r["row"] for r in json.loads(out.stdout)["rows"]}
    assert {"recall over rpc, hits counted, p50", "recall over rpc, hits counted, p95", "recall in process p95",
            "rpc child ready", "rpc child peak RSS"} <= names
    assert not any(n.startswith(("status", "observe", "store open", "path-note", "MCP", "remember gate", "replay"))
                   for n in names)
    bad = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "bench", "--only", "recal"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert bad.returncode == 2 and "unknown group recal" in bad.stderr and "path_notes" in bad.stderr


def test_replay_and_reindex_leave_one_fts_segment_with_the_same_bm25_ranking(home, repo):
    """A bulk index is merged into one FTS5 segment (a query reads each segment's doclists);
    the ranking over it is the fragmented index's, scores and all."""
    from realmem.interface import commands
    from realmem.read import search
    from realmem.write import memories
    from realmem.write.attached import open_attached
    from realmem.projections import replay

    rng = random.Random(4)
    words = "build test deploy docker cache redis queue worker token lint format release branch".split()
    with open_attached(home, repo) as app:
        store = app.project.shared_store  # type: ignore[union-attr]
        # A small in-memory hash makes FTS5 flush many small segments, as a large bulk load does.
        app.conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('hashsize', 1024)")
        for i in range(120):
            memories.add(app, f"{' '.join(rng.sample(words, 3))} {i}", " ".join(rng.sample(words, 8)), store=store,
                         stored_paths=["."], source="add")
        segments = "SELECT count(DISTINCT segid) FROM memories_fts_idx"
        queries = [" ".join(rng.sample(words, 5)) for _ in range(10)]

        def ranking() -> list:
            return [search.bm25(app.conn, q, app.visible_stores(), 50, max_terms=8) for q in queries]

        assert app.conn.execute(segments).fetchone()[0] > 1
        before = ranking()
        replay.replay(app)
        assert app.conn.execute(segments).fetchone()[0] == 1
        assert ranking() == before
        for i in range(5):  # fragmented again, then reindexed
            memories.add(app, f"extra {i}", "more text", store=store, stored_paths=["."], source="add")
        assert commands.reindex(app)["details"]["memories"] == 125
        assert app.conn.execute(segments).fetchone()[0] == 1


def test_bench_verdict_uses_the_unrounded_ratio():
    """A figure a hair past its target is OVER even when its ratio prints as 1.00."""
    from realmem.interface.bench import rows
    got = {r["row"]: (r["ratio"], r["ok"]) for r in rows([{"memories": 1, "replay": {"events_per_s": 19_962},
                                                            "store_open": {"p95_ms": 250.0}}])}
    assert got == {"replay": (1.0, False), "store open p95": (1.0, True)}


def test_backlog_counts_new_gone_and_changed_files_and_stops_past_the_sync_limit(
        home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Session start's backlog: new, gone and edited fact files each count; once the new ones
    alone are past SYNC_FILES the answer is "in the background" and nothing more is looked at
    (a listing that many files longer than the recorded stats is not even compared by name)."""
    from realmem.write import observe
    from realmem.write.attached import open_attached

    monkeypatch.setattr(observe, "_RACY_NS", 0)
    monkeypatch.setattr(observe, "SYNC_FILES", 3)
    when = "2026-01-01T00:00:00.000Z"

    def fact(d: Path, name: str) -> Path:
        mem_id = ids.new_id()
        path = d / name
        path.write_text(files.render(id=mem_id, caption=name, paths=["."], created=when, updated=when,
                                     content=f"About {name}."), encoding="utf-8")
        return path

    with open_attached(home, repo) as app:
        d = app.store_dir(app.project.shared_store)  # type: ignore[union-attr]
    d.mkdir(parents=True, exist_ok=True)
    kept, gone, edited = fact(d, "kept.md"), fact(d, "gone.md"), fact(d, "edited.md")
    with open_attached(home, repo) as app:  # all three read and recorded
        assert observe.backlog(app) == 0
    gone.unlink()
    edited.write_text(edited.read_text(encoding="utf-8").replace("About", "Now about"), encoding="utf-8")
    fact(d, "new.md")
    (d / ".hidden.md").write_text("not a fact", encoding="utf-8")
    (d / "notes.txt").write_text("not a fact", encoding="utf-8")
    with open_attached(home, repo, scan=False) as app:
        assert observe.backlog(app) == 3  # one new, one gone, one edited; kept.md unchanged
    for i in range(5):
        fact(d, f"pulled-{i}.md")
    with open_attached(home, repo, scan=False) as app:
        # Five files more than recorded: past the limit before any name is compared, the count
        # a floor of the six new ones (one went).
        assert observe.backlog(app) == 5
    gone.write_text("---\nnot: closed", encoding="utf-8")  # listed again, as a malformed file
    with open_attached(home, repo, scan=False) as app:
        assert observe.backlog(app) == 6  # the new files alone: past the limit, nothing else counted
    assert kept.exists()
