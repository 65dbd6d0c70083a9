"""Freshness (issue 9, item 6): a real git repository whose commits are dated around a fact's
`updated` time; the flag appears in path notes, recall, show/manage and `realmem stale`, and it
disappears once the memory is edited.

Commit dates are set with GIT_COMMITTER_DATE, so the history is exact and nothing sleeps.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from realmem.interface import manage, tools
from realmem.interface import render
from realmem.read import freshness, recall
from realmem.stores import ids
from realmem.write import memories
from realmem.app import Realmem
from realmem.write.attached import open_attached
from realmem.write.observe import scan_stores
from realmem.read.pathnotes import NoteIndex, path_notes
from helpers.cli import as_json, ok

UPDATED = "2026-09-27T12:00:00.000Z"
FLAG7 = "src/db changed in 7 commits since 2026-09-27; verify before relying on it"


def commit(repo: Path, files: dict[str, str], when: str, message: str = "change") -> str:
    """Write files and commit them with author and committer date ``when`` (ISO)."""
    for rel, text in files.items():
        f = repo / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")
    env = {**os.environ, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when}
    base = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*base, "add", "-A", *files], cwd=repo, check=True, capture_output=True, env=env)
    subprocess.run([*base, "commit", "-q", "-m", message], cwd=repo, check=True, capture_output=True, env=env)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def fact_file(app: Realmem, name: str, caption: str, content: str, paths: list[str], *,
              updated: str = UPDATED, store: str | None = None) -> Path:
    """A hand-written (or pulled) fact file with a past `updated`, observed by a store scan."""
    d = app.store_dir(store or app.project.shared_store)  # type: ignore[union-attr]
    d.mkdir(parents=True, exist_ok=True)
    listed = "".join(f"  - {json.dumps(p)}\n" for p in paths)
    f = d / name
    f.write_text(f"---\nid: {ids.new_id()}\ncaption: {caption}\npaths:\n{listed}created: {updated}\n"
                 f"updated: {updated}\n---\n\n{content}\n", encoding="utf-8")
    scan_stores(app)
    return f


def memory(app: Realmem, caption: str):  # type: ignore[no-untyped-def]
    found = [m for m in app.memories() if m.caption == caption]
    assert len(found) == 1
    return found[0]


@pytest.fixture
def app(home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Realmem]:
    monkeypatch.setenv("REALMEM_WORKER_AUTOSTART", "0")
    freshness.forget_cache()
    commit(repo, {"src/db/schema.sql": "create table a;\n", "src/api/routes.py": "routes = []\n",
                  "db/migrations/001_init.sql": "-- init\n", "db/migrations/README.md": "notes\n"},
           "2026-09-01T10:00:00Z", "setup")
    a = open_attached(home, repo, session="s1")
    yield a
    a.close()
    freshness.forget_cache()


def seven_db_commits(repo: Path) -> None:
    commit(repo, {"src/db/schema.sql": "before the fact\n"}, "2026-09-20T10:00:00Z")  # before `updated`
    for day in range(1, 8):
        commit(repo, {f"src/db/q{day}.py": f"query {day}\n"}, f"2026-10-0{day}T10:00:00Z")
    commit(repo, {"src/api/routes.py": "routes = [1]\n"}, "2026-10-09T10:00:00Z")  # another area


def test_commits_after_updated_flag_the_memory_and_an_edit_clears_it(app: Realmem, repo: Path) -> None:
    fact_file(app, "db-pool.md", "Queries use the pool helper", "Use db.pool() for queries.", ["src/db"])
    m = memory(app, "Queries use the pool helper")
    assert freshness.flag(app, m) is None  # nothing changed since
    seven_db_commits(repo)
    found = freshness.flag(app, m)
    assert found is not None and found.text() == FLAG7
    assert (found.paths, found.commits, found.since) == (("src/db",), 7, "2026-09-27")

    edited = memories.edit(app, (m.store, m.id), content="Use db.pool() for every query.")
    assert edited.updated > UPDATED
    assert freshness.flag(app, edited) is None
    assert freshness.stale_memories(app) == []


def test_the_flag_where_the_agent_sees_it(app: Realmem, repo: Path, home: Path) -> None:
    fact_file(app, "db-pool.md", "Queries use the pool helper", "Use db.pool() for queries.", ["src/db"])
    fact_file(app, "api.md", "Routes live in routes.py", "Register endpoints in src/api/routes.py.", ["src/api"],
              updated="2026-10-20T00:00:00.000Z")
    seven_db_commits(repo)
    m = memory(app, "Queries use the pool helper")
    fresh = memory(app, "Routes live in routes.py")

    freshness.warm(app)  # what session start does (in the background there)
    n = path_notes(app, NoteIndex(), tool_name="read", tool_input={"path": "src/db/schema.sql"}, shown=[])
    assert n.text is not None and f"[{ids.short(m.id)}] {m.caption} (src/db)\n⚠ {FLAG7}" in n.text
    n = path_notes(app, NoteIndex(), tool_name="read", tool_input={"path": "src/api/routes.py"}, shown=[])
    assert n.text is not None and "⚠" not in n.text  # written after the last change there

    res = recall.recall(app, queries=["pool helper queries"], count_hits=False)
    text = render.recall_text(res, freshness.flags_text(app, [i.memory for i in res.items]))
    assert f"{m.caption} (shared · src/db)\n⚠ {FLAG7}\nUse db.pool()" in text
    # the realmem_recall tool (rpc child and MCP server alike)
    assert f"\n⚠ {FLAG7}\n" in tools.recall(app, queries=["pool helper queries"])["text"]

    detail = manage.detail(app, (m.store, m.id))
    assert detail["stale"] == {"paths": ["src/db"], "commits": 7, "since": "2026-09-27", "at_least": False,
                               "text": FLAG7}
    assert manage.detail(app, (fresh.store, fresh.id))["stale"] is None
    items = {i["caption"]: i for i in manage.items(app)}
    assert items[m.caption]["stale"] == FLAG7 and items[fresh.caption]["stale"] is None

    # the command line, as a separate process
    listed = as_json(home, repo, "stale")
    assert [(i["id"], i["stale"]["commits"]) for i in listed] == [(ids.short(m.id), 7)]
    table = ok(home, repo, "stale").stdout
    assert ids.short(m.id) in table and "src/db" in table and "1 stale memory" in table
    assert FLAG7 in ok(home, repo, "show", ids.short(m.id)).stdout
    assert as_json(home, repo, "show", ids.short(m.id))["stale"]["commits"] == 7
    rows = ok(home, repo, "manage").stdout.splitlines()
    assert any(m.caption in r and manage.STALE in r for r in rows)
    assert not any(fresh.caption in r and manage.STALE in r for r in rows)
    got = as_json(home, repo, "recall", "pool", "helper")["items"]
    assert got[0]["stale"] == FLAG7
    assert FLAG7 in ok(home, repo, "recall", "pool", "helper").stdout


def test_directories_files_and_globs(app: Realmem, repo: Path) -> None:
    fact_file(app, "mig.md", "Migrations are append-only", "Never edit an applied migration.",
              ["**/migrations/*.sql"])
    fact_file(app, "routes.md", "Routes file", "All routes are in one file.", ["src/api/routes.py"])
    commit(repo, {"db/migrations/README.md": "more notes\n"}, "2026-10-01T10:00:00Z")  # not *.sql
    commit(repo, {"src/api/other.py": "x\n"}, "2026-10-02T10:00:00Z")  # a sibling of the file
    mig, routes = memory(app, "Migrations are append-only"), memory(app, "Routes file")
    assert freshness.check(app, [mig, routes]) == {}
    commit(repo, {"db/migrations/002_users.sql": "-- users\n", "src/api/routes.py": "routes = [2]\n"},
           "2026-10-03T10:00:00Z")
    commit(repo, {"db/migrations/003_more.sql": "-- more\n"}, "2026-10-04T10:00:00Z")
    found = freshness.check(app, [mig, routes])
    assert found[(mig.store, mig.id)].text() == ("**/migrations/*.sql changed in 2 commits since 2026-09-27; "
                                                 "verify before relying on it")
    assert found[(routes.store, routes.id)].text() == ("src/api/routes.py changed in 1 commit since 2026-09-27; "
                                                       "verify before relying on it")


def test_several_paths_name_only_the_changed_ones_and_count_each_commit_once(app: Realmem, repo: Path) -> None:
    fact_file(app, "both.md", "Schema and routes move together", "Change both.", ["src/db", "src/api", "infra"])
    commit(repo, {"src/db/a.sql": "a\n", "src/api/a.py": "a\n"}, "2026-10-01T10:00:00Z")
    commit(repo, {"src/db/b.sql": "b\n"}, "2026-10-02T10:00:00Z")
    found = freshness.flag(app, memory(app, "Schema and routes move together"))
    assert found is not None and found.paths == ("src/db", "src/api") and found.commits == 2


def test_commit_dates_out_of_log_order_are_each_counted_by_their_own_date(app: Realmem, repo: Path) -> None:
    """Log order is not date order (a rebase, a skewed clock): a commit newer than the fact
    listed after an older one still counts, an older one listed first does not, and a pattern
    asked about again (the history keeps each pattern's commits by date) answers the same."""
    fact_file(app, "db-pool.md", "Queries use the pool helper", "Use db.pool() for queries.", ["src/db"])
    fact_file(app, "db-glob.md", "SQL files are formatted", "Run sqlfmt.", ["src/db/*.sql"])
    # all within the day of slack git is asked for, so git lists each; b and d are older than the fact
    for when, name in (("2026-10-03T10:00:00Z", "a.sql"), ("2026-09-27T06:00:00Z", "b.sql"),
                       ("2026-10-01T10:00:00Z", "c.py"), ("2026-09-27T09:00:00Z", "d.sql"),
                       ("2026-10-05T10:00:00Z", "e.sql")):
        commit(repo, {f"src/db/{name}": name}, when)
    for _ in range(2):
        found = freshness.check(app, app.memories())
        pool, glob = memory(app, "Queries use the pool helper"), memory(app, "SQL files are formatted")
        assert found[(pool.store, pool.id)].commits == 3
        assert found[(glob.store, glob.id)].commits == 2


def test_project_wide_facts_are_never_flagged(app: Realmem, repo: Path) -> None:
    fact_file(app, "wide.md", "Use pnpm", "This project uses pnpm.", ["."])
    global_store = "global"
    fact_file(app, "g.md", "Prefer ripgrep", "rg over grep.", ["~"], store=global_store)
    seven_db_commits(repo)
    assert freshness.check(app, app.memories()) == {}
    assert freshness.stale_memories(app) == []


def test_the_commit_that_carries_the_fact_file_does_not_count(app: Realmem, repo: Path) -> None:
    f = fact_file(app, "db-pool.md", "Queries use the pool helper", "Use db.pool() for queries.", ["src/db"])
    rel = str(f.relative_to(repo))
    commit(repo, {"src/db/pool.py": "def pool(): ...\n", rel: f.read_text(encoding="utf-8")},
           "2026-09-28T10:00:00Z", "pool helper and its fact")
    m = memory(app, "Queries use the pool helper")
    assert freshness.flag(app, m) is None
    commit(repo, {"src/db/pool.py": "def pool(size=4): ...\n"}, "2026-09-29T10:00:00Z")
    found = freshness.flag(app, m)
    assert found is not None and found.commits == 1


def test_head_moves_forward_and_back(app: Realmem, repo: Path) -> None:
    fact_file(app, "db-pool.md", "Queries use the pool helper", "Use db.pool() for queries.", ["src/db"])
    m = memory(app, "Queries use the pool helper")
    first = commit(repo, {"src/db/a.py": "a\n"}, "2026-10-01T10:00:00Z")
    assert freshness.flag(app, m).commits == 1  # type: ignore[union-attr]
    commit(repo, {"src/db/b.py": "b\n"}, "2026-10-02T10:00:00Z")
    assert freshness.flag(app, m).commits == 2  # type: ignore[union-attr]  (read incrementally)
    subprocess.run(["git", "reset", "-q", "--hard", first], cwd=repo, check=True)
    assert freshness.flag(app, m).commits == 1  # type: ignore[union-attr]  (history rewound: read again)
    subprocess.run(["git", "pack-refs", "--all"], cwd=repo, check=True)  # refs only in packed-refs
    commit(repo, {"src/db/c.py": "c\n"}, "2026-10-03T10:00:00Z")
    subprocess.run(["git", "pack-refs", "--all"], cwd=repo, check=True)
    assert freshness.flag(app, m).commits == 2  # type: ignore[union-attr]


def test_head_is_read_from_files_in_a_linked_worktree(app: Realmem, repo: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    subprocess.run(["git", "worktree", "add", "-q", "-b", "side", str(wt)], cwd=repo, check=True,
                   capture_output=True)
    commit(wt, {"side.txt": "side\n"}, "2026-10-05T10:00:00Z")
    for root in (repo, wt):
        want = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True,
                              text=True).stdout.strip()
        assert freshness.read_head(root, freshness._git_dirs(root)) == want
    subprocess.run(["git", "pack-refs", "--all"], cwd=repo, check=True)
    assert freshness.read_head(wt, freshness._git_dirs(wt)) == want


def test_no_git_history_no_flag_and_the_setting_turns_it_off(app: Realmem, repo: Path, home: Path,
                                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fact_file(app, "db-pool.md", "Queries use the pool helper", "Use db.pool() for queries.", ["src/db"])
    seven_db_commits(repo)
    m = memory(app, "Queries use the pool helper")
    monkeypatch.setenv("REALMEM_FRESHNESS_ENABLED", "false")
    assert freshness.flag(app, m) is None
    n = path_notes(app, NoteIndex(), tool_name="read", tool_input={"path": "src/db"}, shown=[])
    assert n.text is not None and "⚠" not in n.text
    monkeypatch.delenv("REALMEM_FRESHNESS_ENABLED")
    assert freshness.flag(app, m) is not None

    plain = tmp_path / "plain"  # not a repository: nothing to compare with
    (plain / "src" / "db").mkdir(parents=True)
    with open_attached(home, plain) as other:
        fact_file(other, "x.md", "Plain project fact", "About src/db.", ["src/db"])
        assert freshness.check(other, other.memories()) == {}


def test_rpc_path_notes_carry_the_flag(app: Realmem, repo: Path, home: Path) -> None:
    import io

    from realmem.interface.rpc import Server
    fact_file(app, "db-pool.md", "Queries use the pool helper", "Use db.pool() for queries.", ["src/db"])
    seven_db_commits(repo)
    out = io.StringIO()
    server = Server(str(home), out)
    try:
        server.handle({"jsonrpc": "2.0", "id": 1, "method": "session_start",
                       "params": {"cwd": str(repo), "session": "s1"}})
        freshness.wait_for_builds()  # session start reads git off the request thread
        server.handle({"jsonrpc": "2.0", "id": 2, "method": "path_notes",
                       "params": {"cwd": str(repo), "session": "s1", "tool_name": "read",
                                  "input": {"path": "src/db/q1.py"}, "shown": []}})
        res = json.loads(out.getvalue().strip().splitlines()[-1])["result"]
        assert f"⚠ {FLAG7}" in res["text"]
    finally:
        for apps in server.all_apps:
            for a in apps.values():
                a.close()


def test_session_start_scans_for_the_oldest_update_on_a_thread_of_its_own(app: Realmem, repo: Path,
                                                                          home: Path) -> None:
    """The scan of the path-scoped memories for the oldest update (0.1 s at 100k memories) runs
    beside the session start, on its own connection, before the history is read."""
    import io

    from realmem.interface.rpc import Server
    fact_file(app, "db-pool.md", "Queries use the pool helper", "Use db.pool() for queries.", ["src/db"])
    seven_db_commits(repo)
    server = Server(str(home), io.StringIO())
    statements: list[str] = []
    try:
        own = server.app({"cwd": str(repo), "session": "s1"})
        own.conn.exec_trace = lambda cursor, sql, bindings: statements.append(sql) or True
        server.handle({"jsonrpc": "2.0", "id": 1, "method": "session_start",
                       "params": {"cwd": str(repo), "session": "s1"}})
        own.conn.exec_trace = None
        freshness.wait_for_builds()
        assert statements and not any("unixepoch" in sql for sql in statements)
        assert freshness.flag(own, memory(own, "Queries use the pool helper")) is not None  # the history is at hand
    finally:
        for apps in server.all_apps:
            for a in apps.values():
                a.close()


def test_the_path_note_hook_never_waits_for_git(app: Realmem, repo: Path) -> None:
    fact_file(app, "db-pool.md", "Queries use the pool helper", "Use db.pool() for queries.", ["src/db"])
    seven_db_commits(repo)
    m = memory(app, "Queries use the pool helper")
    first = path_notes(app, NoteIndex(), tool_name="read", tool_input={"path": "src/db"}, shown=[])
    assert first.text is not None and m.caption in first.text  # shown at once ...
    assert "⚠" not in first.text  # ... while git is read in the background
    freshness.wait_for_builds()
    again = path_notes(app, NoteIndex(), tool_name="read", tool_input={"path": "src/db"}, shown=[])
    assert f"⚠ {FLAG7}" in (again.text or "")
    # a commit moves HEAD forward: the next hook reads only the new commit, and says 8
    commit(repo, {"src/db/q8.py": "query 8\n"}, "2026-10-08T10:00:00Z")
    later = path_notes(app, NoteIndex(), tool_name="read", tool_input={"path": "src/db"}, shown=[])
    assert "src/db changed in 8 commits since 2026-09-27" in (later.text or "")


def test_a_counted_note_is_done_with_only_if_its_flag_makes_it_too_big(app: Realmem, repo: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Past every limit a note is only counted, and its flag is read only when the flag alone
    might make it too big for the budget; that flag still decides whether the note is done
    with (too big for any limit) or comes back at the next touch."""
    fact_file(app, "a.md", "A", "Short.", ["src/db"])
    fact_file(app, "b.md", "B" * 120, "Long caption.", ["src/db"])
    seven_db_commits(repo)
    freshness.warm(app)
    a, b = memory(app, "A"), memory(app, "B" * 120)
    monkeypatch.setenv("REALMEM_PATHNOTES_MAXFULL", "0")
    monkeypatch.setenv("REALMEM_PATHNOTES_MAXCAPTIONS", "1")
    caption_b = f"[{ids.short(b.id)}] {b.caption} (src/db)"
    for budget, done_with_b in ((len(caption_b) + 10, True), (len(caption_b) + len(FLAG7) + 3, False)):
        monkeypatch.setenv("REALMEM_PATHNOTES_CHARBUDGET", str(budget))
        got = path_notes(app, NoteIndex(), tool_name="read", tool_input={"path": "src/db/q1.py"}, shown=[],
                         record=False)
        assert f"[{ids.short(a.id)}] A (src/db)\n⚠ {FLAG7}" in (got.text or "")
        assert "1 more memory is attached" in (got.text or "")
        assert (ids.short(b.id) in got.shown) is done_with_b, budget


def test_a_history_longer_than_the_scan_limit_says_at_least(app: Realmem, repo: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    fact_file(app, "db-pool.md", "Queries use the pool helper", "Use db.pool() for queries.", ["src/db"])
    seven_db_commits(repo)
    monkeypatch.setattr(freshness, "MAX_COMMITS", 4)
    found = freshness.flag(app, memory(app, "Queries use the pool helper"))
    assert found is not None and found.at_least
    assert found.text().startswith(f"src/db changed in {found.commits}+ commits since 2026-09-27")
