"""Stores, scopes and fact files (spec "Scopes and storage", "Path scopes").

Real temp git repos, real SQLite files, real fact files; no mocks.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from realmem.stores import ids
from realmem.write import memories
from realmem.app import Realmem, RealmemError
from realmem.events import log
from realmem.events import types as ev
from realmem.stores.project import GLOBAL, forget_cache, path_key
from realmem.projections import files, replay
from realmem.read.recall import recall
from realmem.write.attached import open_attached


def add(app: Realmem, caption: str, content: str, scope: str = "shared", paths: list[str] | None = None):
    store, stored = memories.place(app, scope, paths)
    return memories.add(app, caption, content, store=store, stored_paths=stored, source="add")


def open_app(home: Path, cwd: Path, **kw) -> Realmem:
    forget_cache()
    return open_attached(home, cwd, **kw)


def events_of(app: Realmem, type_: type[ev.Event]) -> list[ev.Envelope]:
    return [e for e in log.read(app.conn) if isinstance(e.event, type_)]


def file_of(app: Realmem, m) -> Path:
    return app.store_dir(m.store) / m.file


def assert_clean(app: Realmem) -> None:
    assert replay.check(app).differences == []


# --- project keys ---------------------------------------------------------------------------


def test_git_key_is_root_commit_and_stable_across_a_clone(home: Path, repo: Path, git, tmp_path: Path) -> None:
    root_commit = git(repo, "rev-list", "--max-parents=0", "HEAD")
    (repo / "more.txt").write_text("x\n")
    git(repo, "add", "more.txt")
    git(repo, "commit", "-q", "-m", "second")
    clone = (tmp_path / "elsewhere" / "clone").resolve()
    clone.parent.mkdir()
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    (repo / "sub").mkdir()
    with open_app(home, repo / "sub") as a, open_app(home, clone) as b:
        assert a.project.key == f"git-{root_commit}"
        assert b.project.key == a.project.key
        assert a.project.root == repo and b.project.root == clone
        # personal store is keyed by the project: a memory made in one clone is seen in the other
        m = add(a, "Use the staging database for manual checks", "Its DSN is in 1Password.", "personal")
        assert m.store == f"personal:git-{root_commit}"
    with open_app(home, clone) as b:
        assert [x.id for x in b.memories([b.project.personal_store])] == [m.id]
        # the shared store is the clone's own directory
        assert b.store_dir(b.project.shared_store) == clone / ".pi" / "realmem"


def test_no_commit_repo_and_plain_dir_fall_back_to_path_key(home: Path, tmp_path: Path, git) -> None:
    empty = (tmp_path / "empty-repo").resolve()
    empty.mkdir()
    git(empty, "init", "-q")
    plain = (tmp_path / "plain").resolve()
    plain.mkdir()
    for d in (empty, plain):
        with open_app(home, d) as app:
            assert app.project.key == path_key(d)
            assert re.fullmatch(r"path-[0-9a-f]{16}", app.project.key)
            assert app.project.root == d
            m = add(app, f"A fact about {d.name}", "content", "personal")
            assert m.store == f"personal:{path_key(d)}"
            pj = home / "personal" / app.project.key / "project.json"
            assert pj.is_file()


def test_first_commit_moves_personal_memories_to_git_key(home: Path, tmp_path: Path, git) -> None:
    root = (tmp_path / "young").resolve()
    root.mkdir()
    git(root, "init", "-q")
    with open_app(home, root) as app:
        old_key = app.project.key
        assert old_key.startswith("path-")
        m1 = add(app, "Local Postgres runs on port 5433", "Because 5432 is taken by the system one.", "personal")
        m2 = add(app, "Use the fast linker locally", "export RUSTFLAGS=-Clink-arg=-fuse-ld=mold", "personal",
                 ["src"])
        old_dir = app.store_dir(m1.store)
        assert (old_dir / m1.file).is_file()
    (root / "a.txt").write_text("a\n")
    git(root, "add", "a.txt")
    git(root, "commit", "-q", "-m", "first")
    root_commit = git(root, "rev-parse", "HEAD")
    with open_app(home, root) as app:
        assert app.project.key == f"git-{root_commit}"
        new_store = app.project.personal_store
        moved = events_of(app, ev.MemoryMoved)
        assert sorted(e.event.id for e in moved) == sorted([m1.id, m2.id])
        assert all(e.event.store == f"personal:{old_key}" and e.event.to_store == new_store for e in moved)
        got = {m.id: m for m in app.memories([new_store])}
        assert set(got) == {m1.id, m2.id}
        assert got[m2.id].paths == ["src"]
        new_dir = home / "personal" / f"git-{root_commit}"
        for m in got.values():
            assert (new_dir / m.file).read_text(encoding="utf-8") == m.text
            assert files.parse(m.text).id == m.id
        assert not (old_dir / m1.file).exists() and not (old_dir / m2.file).exists()
        assert not old_dir.exists()
        import json
        pj = json.loads((new_dir / "project.json").read_text())
        assert pj["key"] == f"git-{root_commit}" and pj["root"] == str(root)
        assert app.memories([f"personal:{old_key}"]) == []
        assert_clean(app)
    # reopening does not move anything again
    with open_app(home, root) as app:
        assert len(events_of(app, ev.MemoryMoved)) == 2


# --- placing and moving ---------------------------------------------------------------------


def test_paths_outside_the_project_make_the_fact_global(home: Path, repo: Path, user_home: Path,
                                                        tmp_path: Path) -> None:
    (repo / "src" / "db").mkdir(parents=True)
    with open_app(home, repo / "src") as app:
        assert memories.place(app, "shared", ["db"]) == (app.project.shared_store, ["src/db"])
        assert memories.place(app, "personal", None) == (app.project.personal_store, ["."])
        assert memories.place(app, "shared", ["../README.md", "db/*.sql"]) == (
            app.project.shared_store, ["README.md", "src/db/*.sql"])
        outside = str(tmp_path / "other-project" / "x.py")
        assert memories.place(app, "shared", ["db", outside]) == (GLOBAL, [str(repo / "src" / "db"), outside])
        assert memories.place(app, "personal", ["~/.config/tool.toml"]) == (GLOBAL, ["~/.config/tool.toml"])
        assert memories.place(app, "global", None) == (GLOBAL, ["~"])
        m = add(app, "Tool config lives in the user's dotfiles", "Edit ~/.config/tool.toml.", "shared",
                [str(user_home / ".config" / "tool.toml")])
        assert m.store == GLOBAL and m.paths == ["~/.config/tool.toml"]
        assert file_of(app, m).parent == home / "global"


def test_move_between_stores_reexpresses_paths(home: Path, repo: Path, tmp_path: Path) -> None:
    with open_app(home, repo) as app:
        m = add(app, "Migrations live in src/db", "Use alembic.", "shared", ["src/db", "**/*.sql"])
        used_before = 0
        memories.reinforce(app, (m.store, m.id))
        old_file = file_of(app, m)
        g = memories.move(app, (m.store, m.id), GLOBAL)
        assert g.store == GLOBAL and g.id == m.id
        assert g.paths == [f"{repo}/src/db", f"{repo}/**/*.sql"]
        assert not old_file.exists()
        assert file_of(app, g).is_file() and files.parse(file_of(app, g).read_text()).paths == g.paths
        assert app.counters((GLOBAL, m.id))[0] == used_before + 1  # counters follow the memory
        p = memories.move(app, (GLOBAL, m.id), app.project.personal_store)
        assert p.paths == ["src/db", "**/*.sql"]
        assert p.created == m.created
        # "~" (everywhere) narrows to "." inside a project
        w = add(app, "Prefer ripgrep over grep", "rg is faster.", "global")
        assert w.paths == ["~"]
        assert memories.move(app, (GLOBAL, w.id), app.project.shared_store).paths == ["."]
        # a global path outside the project cannot follow the memory into it
        o = add(app, "Scratch files go to /srv/scratch", "Never to /tmp.", "global",
                [str(tmp_path / "srv" / "scratch")])
        with pytest.raises(RealmemError, match="cannot move"):
            memories.move(app, (GLOBAL, o.id), app.project.shared_store)
        assert app.memory((GLOBAL, o.id)) is not None
        assert_clean(app)


# --- fact files ----------------------------------------------------------------------------

_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def test_fact_file_frontmatter_is_exactly_the_spec(home: Path, repo: Path) -> None:
    with open_app(home, repo) as app:
        m = add(app, "Run e2e tests with pnpm test:e2e",
                "`pnpm test:e2e` needs Docker running; it starts Postgres via docker compose.", "shared",
                ["packages/web"])
        text = file_of(app, m).read_text(encoding="utf-8")
        assert re.fullmatch(
            "---\n"
            f"id: {m.id}\n"
            "caption: Run e2e tests with pnpm test:e2e\n"
            "paths:\n"
            "  - packages/web\n"
            f"created: {_TIME}\n"
            f"updated: {_TIME}\n"
            "---\n\n"
            "`pnpm test:e2e` needs Docker running; it starts Postgres via docker compose.\n",
            text,
        ), text
        assert file_of(app, m) == repo / ".pi" / "realmem" / "run-e2e-tests-with-pnpm-test-e2e.md"
        assert ids.canonical(m.id) == m.id and m.id[14] == "7"  # UUIDv7, canonical form
        # nothing volatile: counters change, the file does not
        before = file_of(app, m).read_bytes()
        memories.reinforce(app, (m.store, m.id))
        recall(app, queries=["e2e"])
        app.emit([ev.PathNotesShown([(m.store, m.id)], [str(repo / "packages/web")], "read")])
        assert app.counters((m.store, m.id)) == (2, 1)
        assert file_of(app, m).read_bytes() == before
        for word in ("used", "count", "importance", "urgency", "inject"):
            assert word not in before.decode().split("---")[1]


def test_tricky_captions_and_paths_round_trip_through_yaml(home: Path, repo: Path) -> None:
    with open_app(home, repo) as app:
        cases = [
            ("yes", ["null"]),
            ("key: value # not a comment", ["- dash", "a: b"]),
            ("2026-01-01 is a date", ["123"]),
            ("'quoted' \"double\"", ["**/migrations/*.sql"]),
            ("中文标题：数据库", ["目录/文件.md"]),
        ]
        for caption, raw_paths in cases:
            m = add(app, caption, "body\n\n  indented line\n---\nnot frontmatter", "shared", raw_paths)
            parsed = files.parse(file_of(app, m).read_text(encoding="utf-8"))
            assert (parsed.id, parsed.caption, parsed.paths, parsed.content) == (m.id, caption, m.paths, m.content)
        assert_clean(app)
    with open_app(home, repo) as app:  # a rescan sees nothing changed
        assert not [e for e in log.read(app.conn) if isinstance(e.event, (ev.FileObserved, ev.FileProblem))]


def test_file_names_are_readable_and_unique(home: Path, repo: Path) -> None:
    with open_app(home, repo) as app:
        a = add(app, "Deploy with Make deploy!", "one", "shared")
        b = add(app, "Deploy with make deploy", "two", "shared")
        c = add(app, "Deploy with make deploy", "three", "shared")
        names = [a.file, b.file, c.file]
        assert len(set(names)) == 3
        assert a.file == "deploy-with-make-deploy.md"
        for n in names:
            assert re.fullmatch(r"deploy-with-make-deploy(-[a-z0-9-]{8})?\.md", n), n
        # an edit that keeps the caption's slug keeps the file name
        e = memories.edit(app, (a.store, a.id), caption="Deploy with make deploy", content="one more")
        assert e.file == a.file
        assert sorted(p.name for p in app.store_dir(a.store).glob("*.md")) == sorted(names)


def test_a_new_caption_renames_the_file_and_git_sees_a_rename(home: Path, repo: Path, git) -> None:  # type: ignore[no-untyped-def]
    content = ("Run the whole suite from the repository root before pushing.\n"
               "It needs Docker running for the database tests.\n"
               "It takes about two minutes; CI runs the same command on every push.\n"
               "Command: make test")
    with open_app(home, repo) as app:
        m = add(app, "Run tests with make test", content, "shared")
        assert m.file == "run-tests-with-make-test.md"
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "memory")
        e = memories.edit(app, (m.store, m.id), caption="Run tests with npm test",
                          content=content.replace("make test", "npm test"))
        assert e.file == "run-tests-with-npm-test.md"
        assert sorted(p.name for p in app.store_dir(m.store).glob("*.md")) == ["run-tests-with-npm-test.md"]
        assert file_of(app, e).read_text(encoding="utf-8") == e.text
        git(repo, "add", "-A")
        status = git(repo, "status", "--porcelain")
        assert status == ("R  .pi/realmem/run-tests-with-make-test.md -> .pi/realmem/run-tests-with-npm-test.md")
        edited = [env.event for env in log.read(app.conn) if isinstance(env.event, ev.MemoryEdited)]
        assert edited[-1].fields.file == "run-tests-with-npm-test.md"  # the log carries the rename
        assert replay.check(app).differences == []
        # a rescan sees nothing changed
        seq = log.last_seq(app.conn)
    with open_app(home, repo) as app:
        assert log.last_seq(app.conn) == seq


def test_replay_reproduces_a_rename_and_removes_the_old_name(home: Path, repo: Path) -> None:
    with open_app(home, repo) as app:
        m = add(app, "Run tests with make test", "`make test` runs the suite.", "personal")
        old_text = file_of(app, m).read_text(encoding="utf-8")
        e = memories.edit(app, (m.store, m.id), caption="Run tests with npm test", content="`npm test` runs it.")
        d = app.store_dir(m.store)
        # the state a crash between writing the new name and removing the old one leaves behind
        (d / m.file).write_text(old_text, encoding="utf-8")
        diffs = replay.check(app).differences
        assert diffs == [f"file left behind by a rename: {d / m.file} (now {e.file})"]
        rep = replay.replay(app)
        assert rep.files_deleted == 1
        assert sorted(p.name for p in d.glob("*.md")) == [e.file]
        assert replay.check(app).differences == []
        # rebuilt from nothing, the files are byte-identical
        (d / e.file).unlink()
        replay.replay(app)
        assert (d / e.file).read_text(encoding="utf-8") == e.text


def test_catch_up_finishes_an_interrupted_rename(home: Path, repo: Path) -> None:
    with open_app(home, repo) as app:
        m = add(app, "Run tests with make test", "`make test` runs the suite.", "shared")
        old_text = file_of(app, m).read_text(encoding="utf-8")
        files_seq = app.projection_seq("files")
        e = memories.edit(app, (m.store, m.id), caption="Run tests with npm test", content="`npm test` runs it.")
        d = app.store_dir(m.store)
        # crash right after the commit: neither file step ran
        (d / e.file).unlink()
        (d / m.file).write_text(old_text, encoding="utf-8")
        app.conn.execute("UPDATE projection_state SET seq=? WHERE name='files'", (files_seq,))
    with open_app(home, repo) as app:
        assert sorted(p.name for p in d.glob("*.md")) == [e.file]
        assert (d / e.file).read_text(encoding="utf-8") == app.memory((m.store, m.id)).text
        assert replay.check(app).differences == []


def test_a_hand_picked_file_name_survives_a_new_caption(home: Path, repo: Path) -> None:
    with open_app(home, repo) as app:
        m = add(app, "Run tests with make test", "`make test` runs the suite.", "shared")
        d = app.store_dir(m.store)
        (d / m.file).rename(d / "testing.md")
    with open_app(home, repo) as app:  # the scan records the hand rename
        assert app.memory((m.store, m.id)).file == "testing.md"
        e = memories.edit(app, (m.store, m.id), caption="Run tests with npm test")
        assert e.file == "testing.md"
        assert sorted(p.name for p in d.glob("*.md")) == ["testing.md"]


def test_unknown_keys_survive_an_edit(home: Path, repo: Path) -> None:
    with open_app(home, repo) as app:
        m = add(app, "Release from the main branch", "Tag vX.Y.Z and push.", "shared")
        path = file_of(app, m)
    text = path.read_text(encoding="utf-8")
    text = text.replace("---\n\n", "owner: alice\ntags:\n  - release\n  - ci\nreviewed: 2025-01-02\n---\n\n", 1)
    path.write_text(text, encoding="utf-8")
    with open_app(home, repo) as app:
        assert app.memory((m.store, m.id)).text == text  # observed as is
        e = memories.edit(app, (m.store, m.id), content="Tag vX.Y.Z, push, and wait for CI.")
        new = path.read_text(encoding="utf-8")
        assert new == e.text
        front = new.split("---")[1]
        assert "owner: alice" in front and "- release" in front and "- ci" in front and "reviewed: 2025-01-02" in front
        assert front.index("updated:") < front.index("owner:")
        assert files.parse(new).content == "Tag vX.Y.Z, push, and wait for CI."
        assert_clean(app)


def test_hand_edit_is_noticed_by_a_scan(home: Path, repo: Path) -> None:
    with open_app(home, repo) as app:
        m = add(app, "CI runs on GitHub Actions", "The workflow is .github/workflows/ci.yml.", "shared")
        path = file_of(app, m)
    path.write_text(path.read_text().replace(".github/workflows/ci.yml.", "buildkite pipeline in .buildkite/."),
                    encoding="utf-8")
    with open_app(home, repo) as app:
        obs = events_of(app, ev.FileObserved)
        assert len(obs) == 1 and obs[0].event.change == "changed" and obs[0].event.id == m.id
        got = app.memory((m.store, m.id))
        assert got.content == "The workflow is buildkite pipeline in .buildkite/."
        assert got.text == path.read_text()
        assert [i.memory.id for i in recall(app, queries=["buildkite"]).items] == [m.id]
        assert recall(app, queries=["yml"]).items == []
        assert_clean(app)
    with open_app(home, repo) as app:  # observed once, not on every open
        assert len(events_of(app, ev.FileObserved)) == 1


def test_hand_written_file_without_id_is_adopted(home: Path, repo: Path) -> None:
    d = repo / ".pi" / "realmem"
    d.mkdir(parents=True)
    (d / "my-note.md").write_text("---\ncaption: Never commit .env files\nauthor: bob\n---\n\nUse .env.example.\n",
                                  encoding="utf-8")
    with open_app(home, repo) as app:
        mems = app.memories([app.project.shared_store])
        assert len(mems) == 1
        m = mems[0]
        assert ids.canonical(m.id) == m.id
        assert (m.caption, m.content, m.paths, m.file) == ("Never commit .env files", "Use .env.example.", ["."],
                                                           "my-note.md")
        on_disk = (d / "my-note.md").read_text(encoding="utf-8")
        assert files.parse(on_disk).id == m.id  # the id was written into the file
        assert "author: bob" in on_disk
        assert [e.event.change for e in events_of(app, ev.FileObserved)] == ["added"]
        assert_clean(app)
    with open_app(home, repo) as app:  # stable: not adopted again under another id
        assert [x.id for x in app.memories([app.project.shared_store])] == [m.id]


def test_deleted_file_removes_the_memory(home: Path, repo: Path) -> None:
    with open_app(home, repo) as app:
        m = add(app, "Lint with ruff", "ruff check .", "shared")
        keep = add(app, "Format with ruff format", "ruff format .", "shared")
        memories.reinforce(app, (m.store, m.id))
    file_of_m = repo / ".pi" / "realmem" / m.file
    file_of_m.unlink()
    with open_app(home, repo) as app:
        assert app.memory((m.store, m.id)) is None
        assert app.counters((m.store, m.id)) == (1, 0)  # absent, not forgotten: kept for its file's return
        assert [e.event.change for e in events_of(app, ev.FileObserved)] == ["deleted"]
        assert [i.memory.id for i in recall(app, queries=["ruff"]).items] == [keep.id]
        assert_clean(app)


def test_file_names_differ_for_ids_made_in_the_same_millisecond(home: Path, repo: Path) -> None:
    """UUIDv7 ids made in the same millisecond (two processes) share their leading characters;
    the file name suffix must come from the random part."""
    same_ms = ["01926b3e-5c1a-7d2f-9a4b-1c2d3e4f5a6b", "01926b3e-5c1a-7d2f-8a4b-aaaaaaaaaaaa",
               "01926b3e-5c1a-7000-8000-000000000001"]
    assert len({ids.short(i)[:8] for i in same_ms}) == 1
    with open_app(home, repo) as app:
        store = app.project.shared_store
        made = [memories.add(app, "Same caption", f"number {n}", store=store, stored_paths=["."], source="add",
                             mem_id=mem_id) for n, mem_id in enumerate(same_ms)]
        assert len({m.file for m in made}) == 3
        for n, m in enumerate(made):
            assert files.parse(file_of(app, m).read_text(encoding="utf-8")).content == f"number {n}"
        assert_clean(app)
