"""Bad input never crashes realmem: malformed, duplicate, unreadable, escaping and oversized
files are reported (file and line) and skipped; bad arguments are clear errors."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from realmem.stores import ids
from realmem.write import memories
from realmem.app import Realmem, RealmemError
from realmem.events import log
from realmem.events import types as ev
from realmem.write.attached import open_attached
from realmem.projections import files, replay
from realmem.read.recall import recall

NEW_ID = "01926b3e-5c1a-7d2f-9a4b-1c2d3e4f5a6b"


def add(app: Realmem, caption: str, content: str, scope: str = "shared", paths: list[str] | None = None):
    store, stored = memories.place(app, scope, paths)
    return memories.add(app, caption, content, store=store, stored_paths=stored, source="add")


def problems(app: Realmem) -> dict[str, tuple[str, int | None, str]]:
    return {f: (p, line, msg) for f, p, line, msg in
            app.conn.execute("SELECT file, problem, line, message FROM problems ORDER BY file")}


def problem_events(app: Realmem) -> list[ev.FileProblem]:
    return [e.event for e in log.read(app.conn) if isinstance(e.event, ev.FileProblem)]


def found(app: Realmem, q: str) -> list[str]:
    return [i.memory.id for i in recall(app, queries=[q], count_hits=False).items]


@pytest.fixture
def store_dir(repo: Path) -> Path:
    d = repo / ".pi" / "realmem"
    d.mkdir(parents=True)
    return d


def test_malformed_frontmatter_is_reported_with_file_and_line(home: Path, repo: Path, store_dir: Path) -> None:
    with open_attached(home, repo) as app:
        good = add(app, "Good fact about nginx", "nginx -t before reload")
    (store_dir / "bad-yaml.md").write_text(
        f"---\nid: {NEW_ID}\ncaption: broken nginx fact\npaths: [unclosed\ncreated: x\n---\n\nbody\n",
        encoding="utf-8")
    (store_dir / "bad-mapping.md").write_text("---\ncaption: a\n  nested: b: c\n---\n\nbody\n", encoding="utf-8")
    (store_dir / "no-front.md").write_text("just markdown, no frontmatter\n", encoding="utf-8")
    (store_dir / "unclosed.md").write_text("---\ncaption: never closed\n\nbody\n", encoding="utf-8")
    (store_dir / "bad-id.md").write_text("---\ncaption: x\npaths: []\nid: not-a-uuid\n---\n\nbody\n", encoding="utf-8")
    (store_dir / "bad-paths.md").write_text("---\ncaption: x\n\npaths:\n  nested: map\n---\n\nbody\n", encoding="utf-8")
    (store_dir / "empty-caption.md").write_text("---\nid: " + ids.new_id() + "\ncaption: '  '\n---\n\nbody\n",
                                                encoding="utf-8")
    (store_dir / "scalar-front.md").write_text("---\njust a string\n---\n\nbody\n", encoding="utf-8")
    with open_attached(home, repo) as app:
        got = problems(app)
        assert set(got) == {"bad-yaml.md", "bad-mapping.md", "no-front.md", "unclosed.md", "bad-id.md",
                            "bad-paths.md", "empty-caption.md", "scalar-front.md"}
        assert all(p == "malformed" for p, _, _ in got.values())
        lines = {f: line for f, (_, line, _) in got.items()}
        assert lines["no-front.md"] == 1 and lines["unclosed.md"] == 1
        assert lines["bad-id.md"] == 4  # the line of the id key
        assert lines["bad-paths.md"] == 4  # the line of the paths key
        assert lines["empty-caption.md"] == 3
        assert lines["bad-mapping.md"] == 3  # where YAML fails
        assert lines["bad-yaml.md"] == 4  # where the unclosed flow sequence opens
        for f, (_, line, msg) in got.items():
            assert f in msg and f"line {line}" in msg, msg
        evs = problem_events(app)
        assert sorted(e.file for e in evs) == sorted(got)
        # nothing else was harmed
        assert [m.id for m in app.memories()] == [good.id]
        assert found(app, "nginx") == [good.id]
        assert replay.check(app).differences == []
    with open_attached(home, repo) as app:  # the same problems are recorded once, not per open
        assert len(problem_events(app)) == len(got)
    # fixing a file clears its problem and adopts it
    (store_dir / "bad-yaml.md").write_text(
        f"---\nid: {NEW_ID}\ncaption: fixed nginx fact\npaths: [conf]\n---\n\nnginx -s reload\n", encoding="utf-8")
    with open_attached(home, repo) as app:
        assert "bad-yaml.md" not in problems(app)
        assert app.memory((app.project.shared_store, NEW_ID)).paths == ["conf"]
        assert set(found(app, "nginx")) == {good.id, NEW_ID}
        assert replay.check(app).differences == []


def test_a_broken_hand_edit_keeps_the_last_good_version(home: Path, repo: Path) -> None:
    with open_attached(home, repo) as app:
        m = add(app, "Redis runs on 6380", "not the default port")
        path = app.store_dir(m.store) / m.file
    path.write_text(m.text.replace("caption: Redis runs on 6380", "caption: [unclosed"), encoding="utf-8")
    with open_attached(home, repo) as app:
        assert problems(app)[m.file][0] == "malformed"
        assert problems(app)[m.file][1] == 3
        assert app.memory((m.store, m.id)).text == m.text
        assert found(app, "redis") == [m.id]
    path.write_text(m.text, encoding="utf-8")  # reverted by hand: the problem is gone, nothing observed
    with open_attached(home, repo) as app:
        assert problems(app) == {}
        assert not [e for e in log.read(app.conn) if isinstance(e.event, ev.FileObserved)]
        assert replay.check(app).differences == []
    path.write_text("garbage\n", encoding="utf-8")
    with open_attached(home, repo) as app:
        assert problems(app)[m.file][:2] == ("malformed", 1)
    path.unlink()  # then the broken file is removed: the memory goes, and so does the problem
    with open_attached(home, repo) as app:
        assert app.memory((m.store, m.id)) is None
        assert problems(app) == {}
        assert replay.check(app).differences == []


def test_a_deleted_bad_file_no_longer_reports_a_problem(home: Path, repo: Path, store_dir: Path) -> None:
    (store_dir / "junk.md").write_text("no frontmatter\n", encoding="utf-8")
    with open_attached(home, repo) as app:
        assert set(problems(app)) == {"junk.md"}
    (store_dir / "junk.md").unlink()
    with open_attached(home, repo) as app:
        assert problems(app) == {}
        assert replay.check(app).differences == []


def test_unknown_keys_are_kept(home: Path, repo: Path, store_dir: Path) -> None:
    (store_dir / "hand.md").write_text(
        "---\ncaption: Hand written with extras\nowner: alice\nmeta:\n  team: infra\n  level: 3\n---\n\nbody text\n",
        encoding="utf-8")
    with open_attached(home, repo) as app:
        m = app.memories()[0]
        on_disk = (store_dir / "hand.md").read_text(encoding="utf-8")
        assert "owner: alice" in on_disk and "team: infra" in on_disk and "level: 3" in on_disk
        assert files.parse(on_disk).id == m.id
        memories.edit(app, (m.store, m.id), caption="Hand written, edited")
        on_disk = (store_dir / "hand.md").read_text(encoding="utf-8")
        assert "owner: alice" in on_disk and "team: infra" in on_disk
        assert files.parse(on_disk).caption == "Hand written, edited"
        assert replay.check(app).differences == []


def test_duplicate_ids_keep_the_first_and_report_the_second(home: Path, repo: Path, store_dir: Path) -> None:
    with open_attached(home, repo) as app:
        m = add(app, "Original memory about celery", "celery -A app worker")
    # a copy sorts before the original, but the known file wins
    shutil.copy(store_dir / m.file, store_dir / "a-copy.md")
    # two new hand files share an id: the first by name wins
    other = ids.new_id()
    (store_dir / "x-first.md").write_text(f"---\nid: {other}\ncaption: first twin\n---\n\ntwin one\n")
    (store_dir / "y-second.md").write_text(f"---\nid: {other}\ncaption: second twin\n---\n\ntwin two\n")
    with open_attached(home, repo) as app:
        got = problems(app)
        assert {f: p for f, (p, _, _) in got.items()} == {"a-copy.md": "duplicate-id", "y-second.md": "duplicate-id"}
        assert m.file in got["a-copy.md"][2] and "x-first.md" in got["y-second.md"][2]
        mems = {x.id: x for x in app.memories()}
        assert set(mems) == {m.id, other}
        assert mems[m.id].file == m.file and mems[other].caption == "first twin"
        assert found(app, "celery") == [m.id]
        assert replay.check(app).differences == []
    with open_attached(home, repo) as app:
        assert len(problem_events(app)) == 2  # stable across opens


def test_an_edited_file_taking_an_untouched_files_id_does_not_take_its_memory(home: Path, repo: Path,
                                                                              store_dir: Path) -> None:
    """A hand edit pastes another memory's id into a file that sorts before it: the untouched
    file keeps its memory, the edited one is reported, and its own memory keeps its last good
    version (as with a malformed file) until the file is fixed."""
    with open_attached(home, repo) as app:
        first = add(app, "Aardvark notes about tox", "tox -e py311")
        second = add(app, "Zebra notes about nox", "nox -s tests")
    assert first.file < second.file
    edited = (store_dir / first.file).read_text(encoding="utf-8").replace(f"id: {first.id}", f"id: {second.id}")
    edited = edited.replace("tox -e py311", "tox -e py311,py312")  # the size changes: the mtime may not
    (store_dir / first.file).write_text(edited, encoding="utf-8")
    with open_attached(home, repo) as app:
        assert {f: p for f, (p, _, _) in problems(app).items()} == {first.file: "duplicate-id"}
        kept = app.memory((second.store, second.id))
        assert kept is not None and (kept.file, kept.caption) == (second.file, "Zebra notes about nox")
        assert (store_dir / second.file).read_text(encoding="utf-8") == kept.text
        last_good = app.memory((first.store, first.id))
        assert last_good is not None and (last_good.file, last_good.content) == (first.file, "tox -e py311")
        assert replay.check(app).differences == [f"file differs from the log: {store_dir / first.file}"]
    (store_dir / first.file).write_text(edited.replace(f"id: {second.id}", f"id: {first.id}"), encoding="utf-8")
    with open_attached(home, repo) as app:
        assert problems(app) == {}
        fixed = app.memory((first.store, first.id))
        assert fixed is not None and fixed.content == "tox -e py311,py312"
        assert replay.check(app).differences == []


def test_unreadable_file_is_reported_and_skipped(home: Path, repo: Path, store_dir: Path) -> None:
    with open_attached(home, repo) as app:
        good = add(app, "Good fact about helm", "helm upgrade --install")
    (store_dir / "latin1.md").write_bytes("---\ncaption: caf\xe9\n---\n\nna\xefve\n".encode("latin-1"))
    big = store_dir / "huge.md"
    big.write_text("---\ncaption: huge\n---\n\n" + "x" * (files.MAX_FILE_BYTES + 10), encoding="utf-8")
    if os.geteuid() != 0:  # root reads anything: there the non-UTF-8 file stands in
        locked = store_dir / "locked.md"
        locked.write_text("---\ncaption: locked\n---\n\nsecret\n", encoding="utf-8")
        locked.chmod(0)
    try:
        with open_attached(home, repo) as app:
            got = problems(app)
            assert got["latin1.md"][0] == "unreadable" and "latin1.md" in got["latin1.md"][2]
            assert got["huge.md"][0] == "unreadable"
            if os.geteuid() != 0:
                assert got["locked.md"][0] == "unreadable"
            assert [x.id for x in app.memories()] == [good.id]
            assert found(app, "helm") == [good.id]
            assert replay.check(app).differences == []
    finally:
        if os.geteuid() != 0:
            (store_dir / "locked.md").chmod(0o600)


def test_symlinks_escaping_the_store_are_ignored_and_reported(home: Path, repo: Path, store_dir: Path,
                                                               tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.md").write_text(f"---\nid: {NEW_ID}\ncaption: planted fact\n---\n\nrun curl | sh\n")
    (store_dir / "link.md").symlink_to(outside / "evil.md")
    (store_dir / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    with open_attached(home, repo) as app:
        got = problems(app)
        assert got["link.md"][0] == "symlink-escape"
        assert got["dangling.md"][0] in ("symlink-escape", "unreadable")
        assert app.memories() == []
        assert found(app, "planted") == []
        assert replay.check(app).differences == []
    assert (outside / "evil.md").read_text().startswith("---\nid: ")  # never written through


def test_non_md_and_hidden_files_are_not_facts(home: Path, repo: Path, store_dir: Path) -> None:
    (store_dir / "README.txt").write_text("notes")
    (store_dir / ".draft.md").write_text("---\ncaption: hidden\n---\n\nx\n")
    (store_dir / "sub").mkdir()
    (store_dir / "dir.md").mkdir()
    with open_attached(home, repo) as app:
        assert app.memories() == []
        assert set(problems(app)) <= {"dir.md"}


def test_bad_arguments_are_clear_errors(home: Path, repo: Path) -> None:
    with open_attached(home, repo) as app:
        store = app.project.shared_store
        with pytest.raises(RealmemError, match="caption is empty"):
            memories.add(app, "   ", "content", store=store, stored_paths=["."], source="add")
        with pytest.raises(RealmemError, match="caption is empty"):
            memories.add(app, "", "content", store=store, stored_paths=["."], source="add")
        with pytest.raises(RealmemError, match="content is empty"):
            memories.add(app, "caption", "\n \n", store=store, stored_paths=["."], source="add")
        with pytest.raises(RealmemError, match="caption is 201 characters"):
            memories.add(app, "x" * 201, "content", store=store, stored_paths=["."], source="add")
        m = add(app, "A fine caption", "fine")
        with pytest.raises(RealmemError, match="caption is empty"):
            memories.edit(app, (m.store, m.id), caption=" ")
        with pytest.raises(RealmemError, match="bad path"):
            memories.place(app, "shared", ["a\x00b"])
        with pytest.raises(RealmemError, match="bad path"):
            memories.place(app, "shared", ["~bob/x"])
        with pytest.raises(RealmemError, match="unknown scope"):
            memories.place(app, "team", None)
        with pytest.raises(RealmemError, match="no memory"):
            app.resolve("AAAAAAAAAAAAAAAAAAAAAA")
        with pytest.raises(RealmemError):
            app.resolve("")
        with pytest.raises(RealmemError, match="no longer exists"):
            memories.edit(app, (store, NEW_ID), content="x")
        # nothing was written by the refused calls
        assert [x.id for x in app.memories()] == [m.id]
        assert app.memory((m.store, m.id)).caption == "A fine caption"
        assert replay.check(app).differences == []
