"""/realmem import (spec: "Import ... marks context files as imported only when the agent actually
stored facts from them"): begin/finish as the adapter drives them, and the headless import
through a scripted chat model (FakeChat) with every fact going through the real remember gate
(FakeSystemOne's heuristic judge).  Real git repo, real SQLite, real loopback servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from realmem.read import prompt
from realmem.gate import importer
from realmem.write import memories
from realmem.app import Realmem, RealmemError
from realmem.fakes import FakeChat, FakeSystemOne
from realmem.gate.remember import remember
from realmem.interface.render import outcome_text
from realmem.write.attached import open_attached

AGENTS = "# Agents\n\n- Run `make test` before pushing.\n- Migrations live in db/migrations.\n"
CLAUDE = "# Claude\n\nThe user prefers short answers.\n"


@pytest.fixture(autouse=True)
def no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REALMEM_WORKER_AUTOSTART", "0")


@pytest.fixture
def files(repo: Path) -> Path:
    (repo / "AGENTS.md").write_text(AGENTS, encoding="utf-8")
    (repo / "CLAUDE.md").write_text(CLAUDE, encoding="utf-8")
    (repo / "db" / "migrations").mkdir(parents=True)
    return repo


def open_app(home: Path, cwd: Path, session: str) -> Realmem:
    return open_attached(home, cwd, session=session)


def store_fact(app: Realmem, caption: str = "Run make test before pushing") -> None:
    memories.add(app, caption, f"{caption}.", store=app.store_for_scope("shared"), stored_paths=["."],
                 source="remember")


def imported_paths(app: Realmem) -> list[str]:
    return sorted(r[0] for r in app.conn.execute("SELECT path FROM imported_files"))


# --- begin / finish -----------------------------------------------------------------------------------

def test_begin_returns_the_instruction_with_every_context_file(home: Path, files: Path) -> None:
    with open_app(home, files, "s1") as a:
        res = importer.begin(a, [])
    assert res["files"] == [str(files / "AGENTS.md"), str(files / "CLAUDE.md")]
    assert "realmem_remember" in res["prompt"]
    assert f'<file path="{files / "AGENTS.md"}">\n{AGENTS}\n</file>' in res["prompt"]
    assert CLAUDE not in res["prompt"] and "file 1 of 2" in res["prompt"]  # one file a run
    assert "AGENTS.md" in res["text"] and "CLAUDE.md" in res["text"]


def test_each_file_is_imported_only_by_the_facts_stored_from_it(home: Path, files: Path) -> None:
    """Two context files: facts stored during the first file's run mark only the first; the
    second gets its own run, and with nothing stored it stays in the prompt."""
    with open_app(home, files, "s1") as a:
        importer.begin(a, [])
        store_fact(a)
        first = importer.finish(a)
        assert first["imported"] == [str(files / "AGENTS.md")]
        assert (files / ".pi" / "realmem" / ".imported").read_text(encoding="utf-8") == \
            f"{prompt.file_hash(AGENTS)} AGENTS.md\n"  # its fact went shared: recorded for teammates
        assert CLAUDE in first["prompt"] and AGENTS not in first["prompt"] and "file 2 of 2" in first["prompt"]
        assert "Next: CLAUDE.md." in first["text"]
        second = importer.finish(a)  # the agent stored nothing from CLAUDE.md
        assert second["imported"] == [] and second["prompt"] is None
        assert "No facts were stored from CLAUDE.md, so it stays in the prompt" in second["text"]
        assert imported_paths(a) == [str(files / "AGENTS.md")]
        assert "already finished" in importer.finish(a)["text"]


def test_facts_of_an_imported_file_default_to_shared_and_its_directory(home: Path, files: Path) -> None:
    """The agent leaves scope (and paths) out: a project's context file is team knowledge, so
    its facts go to the shared store, and a sub-directory's file's facts are about that directory."""
    from realmem.interface import tools  # here: the front-end function the agent's tool call reaches

    sub = files / "db"
    sub.mkdir(exist_ok=True)
    (sub / "AGENTS.md").write_text("# db agents\nMigrations are numbered NNN_name.sql.\n", encoding="utf-8")
    with open_app(home, files, "s1") as a:
        res = importer.begin(a, ["db/AGENTS.md"])
        assert "paths default to db" in res["prompt"]
        out = tools.remember(a, caption="Migrations are numbered", content="Migrations are numbered NNN_name.sql.",
                             user_requested=True)
        m = a.memory(a.resolve(out["details"]["id"]))
        assert m.store == a.project.shared_store and m.paths == ["db"]  # type: ignore[union-attr]
        importer.finish(a)
        after = tools.remember(a, caption="Personal editor choice", content="I use vim keybindings here.",
                               user_requested=True)  # the import is over: no defaults any more
        assert a.memory(a.resolve(after["details"]["id"])).paths != ["db"]


def test_begin_from_a_subdirectory_finds_the_root_files(home: Path, files: Path) -> None:
    sub = files / "db"
    (sub / "AGENTS.md").write_text("# db agents\n", encoding="utf-8")
    with open_app(home, sub, "s1") as a:
        res = importer.begin(a, [])
    assert res["files"] == [str(sub / "AGENTS.md"), str(files / "AGENTS.md"), str(files / "CLAUDE.md")]


def test_begin_with_nothing_to_import_and_with_a_missing_file(home: Path, repo: Path) -> None:
    with open_app(home, repo, "s1") as a:
        res = importer.begin(a, [])
        assert res["prompt"] is None and res["files"] == []
        with pytest.raises(RealmemError, match="not a file"):
            importer.begin(a, ["NOPE.md"])


def test_finish_marks_imported_when_a_fact_was_stored_in_between(home: Path, files: Path) -> None:
    with open_app(home, files, "s1") as a:
        importer.begin(a, ["AGENTS.md"])
        store_fact(a)
        store_fact(a, "Migrations live in db/migrations")
        res = importer.finish(a)
        assert res["imported"] == [str(files / "AGENTS.md")]
        assert "2 facts stored" in res["text"]
        assert imported_paths(a) == [str(files / "AGENTS.md")]
        assert prompt.imported(a, str(files / "AGENTS.md"), AGENTS)
        assert not prompt.imported(a, str(files / "CLAUDE.md"), CLAUDE)
        again = importer.finish(a)
        assert again["imported"] == [] and "already finished" in again["text"]


def test_finish_without_a_stored_fact_marks_nothing(home: Path, files: Path) -> None:
    with open_app(home, files, "s1") as a:
        store_fact(a, "Stored before the import began")
        importer.begin(a, [])
        res = importer.finish(a)
        assert res["imported"] == [] and "No facts were stored" in res["text"]
        assert imported_paths(a) == []


def test_a_refused_fact_does_not_count(home: Path, files: Path) -> None:
    with open_app(home, files, "s1") as a:
        importer.begin(a, [])
        out = remember(a, "Deploy token", "Use token ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 to deploy.")
        assert out.action == "refuse"
        assert importer.finish(a)["imported"] == []


def test_facts_stored_by_another_session_do_not_count(home: Path, files: Path) -> None:
    with open_app(home, files, "s1") as a, open_app(home, files, "s2") as b:
        importer.begin(a, ["AGENTS.md"])
        store_fact(b)  # another Pi session stores a fact meanwhile
        assert importer.finish(a)["imported"] == []
        assert imported_paths(a) == []


def test_finish_without_begin(home: Path, files: Path) -> None:
    with open_app(home, files, "s1") as a, open_app(home, files, "s2") as b:
        importer.begin(b, [])
        assert importer.finish(a) == {"text": "No import is in progress.", "imported": [], "prompt": None}


def test_another_sessions_finished_import_does_not_finish_this_one(home: Path, files: Path) -> None:
    with open_app(home, files, "s1") as a, open_app(home, files, "s2") as b:
        importer.begin(a, ["AGENTS.md"])
        importer.begin(b, ["CLAUDE.md"])
        store_fact(b, "The user prefers short answers")
        assert importer.finish(b)["imported"] == [str(files / "CLAUDE.md")]
        store_fact(a)
        res = importer.finish(a)
        assert res["imported"] == [str(files / "AGENTS.md")], res["text"]
        assert imported_paths(a) == [str(files / "AGENTS.md"), str(files / "CLAUDE.md")]


def test_a_file_edited_during_the_import_is_marked_with_its_new_content(home: Path, files: Path) -> None:
    with open_app(home, files, "s1") as a:
        importer.begin(a, ["AGENTS.md"])
        store_fact(a)
        (files / "AGENTS.md").write_text(AGENTS + "- New rule.\n", encoding="utf-8")
        importer.finish(a)
        assert prompt.imported(a, "AGENTS.md", AGENTS + "- New rule.\n")


def test_an_imported_unchanged_file_is_not_imported_again_unless_forced(home: Path, files: Path) -> None:
    agents = files / "AGENTS.md"
    with open_app(home, files, "s1") as a:
        importer.begin(a, ["AGENTS.md"])
        store_fact(a)
        assert importer.finish(a)["imported"] == [str(agents)]
        events = a.conn.execute("SELECT count(*) FROM events").fetchone()[0]
        again = importer.begin(a, ["AGENTS.md"])
        assert again == {"prompt": None, "files": [], "skipped": [str(agents)],
                         "text": "AGENTS.md is already imported and unchanged since; nothing to do "
                                 "(/realmem import --force imports again)."}
        assert a.conn.execute("SELECT count(*) FROM events").fetchone()[0] == events  # no import started
        # Without file arguments the other, never imported file is still imported.
        both = importer.begin(a, [])
        assert both["files"] == [str(files / "CLAUDE.md")] and both["skipped"] == [str(agents)]
        assert "Skipped AGENTS.md: already imported and unchanged." in both["text"]
        assert AGENTS not in both["prompt"]
        forced = importer.begin(a, ["AGENTS.md"], force=True)
        assert forced["files"] == [str(agents)] and AGENTS in forced["prompt"]
        # A forced run that stores nothing new leaves the earlier import standing, and says so.
        res = importer.finish(a)
        assert res == {"text": "No new facts were stored; AGENTS.md stays imported from the earlier import.",
                       "imported": [], "prompt": None}
        assert prompt.imported(a, str(agents), AGENTS)
        agents.write_text(AGENTS + "- New rule.\n", encoding="utf-8")
        changed = importer.begin(a, ["AGENTS.md"])
        assert changed["files"] == [str(agents)] and changed["skipped"] == []


# --- headless import through a chat model ----------------------------------------------------------

@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeSystemOne, FakeChat]]:
    with FakeSystemOne() as s1, FakeChat(heuristic=False) as chat:
        monkeypatch.setenv("REALMEM_SEMIF_URL", s1.url)
        monkeypatch.setenv("REALMEM_REWRITER_URL", chat.url)
        yield s1, chat


def facts_json(*facts: dict) -> str:  # type: ignore[type-arg]
    return "Here are the facts:\n" + json.dumps({"facts": list(facts)})


def test_import_headless_stores_facts_through_the_gate(home: Path, files: Path,
                                                       servers: tuple[FakeSystemOne, FakeChat]) -> None:
    s1, chat = servers
    chat.script([facts_json(
        {"caption": "Run make test before pushing", "content": "Run `make test` before every push.",
         "paths": [], "scope": "shared"},
        {"caption": "Migrations live in db/migrations", "content": "Database migrations are in db/migrations.",
         "paths": ["db/migrations"], "scope": "shared"},
        {"caption": "Deploy token", "content": "Deploy with ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8.",
         "paths": [], "scope": "shared"},
    )])
    progress: list[tuple[int, int, str]] = []
    with open_app(home, files, "cli") as a:
        rep = importer.import_headless(a, ["AGENTS.md"], progress=lambda d, t, f: progress.append((d, t, f)),
                                       word=outcome_text)
        assert rep["files"] == [str(files / "AGENTS.md")] and rep["stored"] == 2
        assert len(rep["outcomes"]) == 3 and rep["outcomes"][2].startswith("Refused")
        mems = {m.caption: m.paths for m in a.memories()}
        assert mems == {"Run make test before pushing": ["."], "Migrations live in db/migrations": ["db/migrations"]}
        assert prompt.imported(a, str(files / "AGENTS.md"), AGENTS)
        assert not prompt.imported(a, str(files / "CLAUDE.md"), CLAUDE)
    assert progress == [(1, 3, "AGENTS.md"), (2, 3, "AGENTS.md"), (3, 3, "AGENTS.md")]
    judged = [r for r in s1.requests if r.path == "/v1/systemone"]
    assert judged, "the facts did not go through the SemIf gate"
    sent = [r for r in chat.requests if r.path == "/v1/chat/completions"][0].body["messages"]
    assert sent[0]["role"] == "system" and "JSON" in sent[0]["content"]
    assert sent[1]["content"] == f"File AGENTS.md:\n\n{AGENTS}"


def test_import_headless_with_no_stored_fact_marks_nothing(home: Path, files: Path,
                                                           servers: tuple[FakeSystemOne, FakeChat]) -> None:
    _, chat = servers
    chat.script([facts_json(), json.dumps({"facts": [{"caption": "x"}, "not a fact"]})])
    with open_app(home, files, "cli") as a:
        rep = importer.import_headless(a, [], word=outcome_text)
        assert rep["files"] == [] and rep["stored"] == 0
        assert rep["outcomes"] == ["Skipped a fact from CLAUDE.md: content is empty: give the fact itself"]
        assert imported_paths(a) == []


def test_a_malformed_fact_is_skipped_and_the_others_are_stored(home: Path, files: Path,
                                                               servers: tuple[FakeSystemOne, FakeChat]) -> None:
    _, chat = servers
    chat.script([facts_json({"caption": "Run make test before pushing", "content": ""},
                            {"caption": "Migrations live in db/migrations",
                             "content": "Database migrations are in db/migrations.", "paths": ["db/migrations"]})])
    with open_app(home, files, "cli") as a:
        rep = importer.import_headless(a, ["AGENTS.md"], word=outcome_text)
        assert rep["stored"] == 1 and rep["files"] == [str(files / "AGENTS.md")]
        assert rep["outcomes"][0].startswith("Skipped a fact from AGENTS.md: content is empty")
        assert [m.caption for m in a.memories()] == ["Migrations live in db/migrations"]


def test_import_headless_through_the_pi_bridge(home: Path, files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeSystemOne() as s1, FakeChat(heuristic=False, any_model=True, key="bridge-token") as chat:
        monkeypatch.setenv("REALMEM_SEMIF_URL", s1.url)
        (home / "bridge").mkdir()
        (home / "bridge" / f"{os.getpid()}.json").write_text(
            json.dumps({"url": chat.url, "token": "bridge-token", "pid": os.getpid()}), encoding="utf-8")
        chat.script([facts_json({"caption": "The user prefers short answers",
                                 "content": "Keep answers short.", "scope": "global"})])
        with open_app(home, files, "cli") as a:
            rep = importer.import_headless(a, ["CLAUDE.md"], word=outcome_text)
            assert rep["stored"] == 1
            assert [m.store for m in a.memories()] == ["global"]
        assert chat.requests[0].headers["authorization"] == "Bearer bridge-token"


def test_import_headless_without_a_chat_model_errors_clearly(home: Path, files: Path) -> None:
    with open_app(home, files, "cli") as a:
        with pytest.raises(RealmemError, match="needs a chat model: set rewriter.url"):
            importer.import_headless(a, [], word=outcome_text)
        assert imported_paths(a) == [] and a.memories() == []
    env = {**os.environ, "REALMEM_HOME": str(home)}
    res = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "--cwd", str(files), "import"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 1
    assert "realmem: importing without Pi needs a chat model" in res.stderr


def test_import_headless_when_the_chat_model_fails(home: Path, files: Path,
                                                   servers: tuple[FakeSystemOne, FakeChat]) -> None:
    _, chat = servers
    chat.fail_next(503, n=10)
    with open_app(home, files, "cli") as a:
        with pytest.raises(RealmemError, match="could not split AGENTS.md"):
            importer.import_headless(a, ["AGENTS.md"], word=outcome_text)
        assert imported_paths(a) == []


def test_cli_import(home: Path, files: Path, servers: tuple[FakeSystemOne, FakeChat]) -> None:
    _, chat = servers
    chat.script([facts_json({"caption": "The user prefers short answers", "content": "Keep answers short.",
                             "scope": "personal"})])
    env = {**os.environ, "REALMEM_HOME": str(home)}
    res = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "--cwd", str(files), "import",
                          "CLAUDE.md"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "Imported CLAUDE.md: 1 fact stored; realmem now replaces it in the prompt." in res.stdout
    with open_app(home, files, "t") as a:
        assert imported_paths(a) == [str(files / "CLAUDE.md")]


def test_cli_import_skips_an_imported_unchanged_file_unless_forced(home: Path, files: Path,
                                                                   servers: tuple[FakeSystemOne, FakeChat]) -> None:
    _, chat = servers
    fact = facts_json({"caption": "The user prefers short answers", "content": "Keep answers short.",
                       "scope": "personal"})
    chat.script([fact, fact])
    env = {**os.environ, "REALMEM_HOME": str(home)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "--cwd", str(files), "import",
                               "CLAUDE.md", *args], capture_output=True, text=True, env=env, timeout=300)

    assert run().returncode == 0
    asked = len([r for r in chat.requests if r.path == "/v1/chat/completions"])
    res = run()
    assert res.returncode == 0, res.stderr
    assert res.stdout == ("CLAUDE.md is already imported and unchanged since; nothing to do "
                          "(realmem import --force imports again).\n")
    assert len([r for r in chat.requests if r.path == "/v1/chat/completions"]) == asked  # the model was not asked
    forced = run("--force")
    assert forced.returncode == 0, forced.stderr
    assert len([r for r in chat.requests if r.path == "/v1/chat/completions"]) == asked + 1


def test_a_reply_without_a_facts_list_is_a_clear_error(home: Path, files: Path,
                                                       servers: tuple[FakeSystemOne, FakeChat]) -> None:
    """A model that answers in another shape (here a rewrite's {caption, content}) is named as
    the cause, instead of a bare "No facts were stored"."""
    _, chat = servers
    chat.script([json.dumps({"caption": "Agents", "content": "Run make test before pushing."})])
    with open_app(home, files, "cli") as a:
        with pytest.raises(RealmemError, match='could not split AGENTS.md: its reply has no "facts" list'):
            importer.import_headless(a, ["AGENTS.md"], word=outcome_text)
        assert imported_paths(a) == [] and a.memories() == []


def test_cli_import_with_the_unscripted_fake_chat(home: Path, files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's local trial (`python -m realmem.fakes --semif --embeddings --chat`): the
    fake chat model's heuristic splits a context file into one fact per bullet or paragraph."""
    with FakeSystemOne() as s1, FakeChat() as chat:
        env = {**os.environ, "REALMEM_HOME": str(home), "REALMEM_SEMIF_URL": s1.url,
               "REALMEM_REWRITER_URL": chat.url}
        res = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "--cwd", str(files), "import",
                              "AGENTS.md"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Imported AGENTS.md: 2 facts stored" in res.stdout
    with open_app(home, files, "t") as a:
        assert sorted(m.content for m in a.memories()) == ["Migrations live in db/migrations.",
                                                           "Run `make test` before pushing."]
        assert imported_paths(a) == [str(files / "AGENTS.md")]


# --- a context file linked out of the project is never read ------------------------------------------

def fake_private_key() -> str:
    import secrets  # built at test time: no realistic key is ever committed
    kind = "OPENSSH " + "PRIVATE KEY"
    return f"-----BEGIN {kind}-----\n{secrets.token_urlsafe(48)}\n-----END {kind}-----\n"


@pytest.fixture
def linked_key(files: Path, tmp_path: Path) -> str:
    """AGENTS.md committed as a symlink to a private key outside the project."""
    key = fake_private_key()
    (tmp_path / "ssh").mkdir()
    (tmp_path / "ssh" / "id_ed25519").write_text(key, encoding="utf-8")
    (files / "AGENTS.md").unlink()
    (files / "AGENTS.md").symlink_to(tmp_path / "ssh" / "id_ed25519")
    return key


def test_begin_does_not_read_a_context_file_linked_out_of_the_project(home: Path, files: Path, linked_key: str) -> None:
    with open_app(home, files, "s1") as a:
        res = importer.begin(a, [])
        assert res["files"] == [str(files / "CLAUDE.md")]
        assert linked_key.splitlines()[1] not in res["prompt"]
        assert "AGENTS.md is not read: it is a symlink to" in res["text"] and "outside the project" in res["text"]
        with pytest.raises(RealmemError, match=r"^AGENTS.md is not read: it is a symlink to .*outside the project$"):
            importer.begin(a, ["AGENTS.md"])
        (files / "CLAUDE.md").unlink()
        only = importer.begin(a, [])
        assert only["prompt"] is None and "outside the project" in only["text"]


def test_a_link_that_stays_in_the_project_is_read(home: Path, files: Path) -> None:
    (files / "docs").mkdir()
    (files / "docs" / "agents.md").write_text(AGENTS, encoding="utf-8")
    (files / "AGENTS.md").unlink()
    (files / "AGENTS.md").symlink_to("docs/agents.md")
    with open_app(home, files, "s1") as a:
        res = importer.begin(a, [])
    assert res["files"] == [str(files / "AGENTS.md"), str(files / "CLAUDE.md")] and AGENTS in res["prompt"]


def test_the_global_context_file_may_not_leave_the_pi_directory(home: Path, files: Path, user_home: Path,
                                                                tmp_path: Path) -> None:
    pi = user_home / ".pi" / "agent"
    pi.mkdir(parents=True, exist_ok=True)
    (pi / "AGENTS.md").write_text(CLAUDE, encoding="utf-8")
    secret = tmp_path / "secret.txt"
    secret.write_text(fake_private_key(), encoding="utf-8")
    (pi / "LINKED.md").symlink_to(secret)
    with open_app(home, files, "s1") as a:
        assert importer.begin(a, [str(pi / "AGENTS.md")])["files"] == [str(pi / "AGENTS.md")]
        with pytest.raises(RealmemError, match="outside your Pi directory"):
            importer.begin(a, [str(pi / "LINKED.md")])


def test_import_headless_never_sends_a_linked_key_to_the_chat_model(home: Path, files: Path, linked_key: str,
                                                                    servers: tuple[FakeSystemOne, FakeChat]) -> None:
    _, chat = servers
    chat.script([facts_json({"caption": "The user prefers short answers", "content": "Keep answers short.",
                             "scope": "personal"})])
    env = {**os.environ, "REALMEM_HOME": str(home)}
    res = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "--cwd", str(files),
                          "import"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "AGENTS.md is not read: it is a symlink to" in res.stdout and "Imported CLAUDE.md" in res.stdout
    sent = json.dumps([r.body for r in chat.requests])
    assert linked_key.splitlines()[1] not in sent and "CLAUDE.md" in sent
    res = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "--cwd", str(files),
                          "import", "AGENTS.md"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 1 and "outside the project" in res.stderr and "Traceback" not in res.stderr
    assert linked_key.splitlines()[1] not in json.dumps([r.body for r in chat.requests])


# --- the global context file ------------------------------------------------------------------------

GLOBAL = "# My preferences\nAnswer tersely. Prefer pnpm over npm in every project.\n"


def test_the_global_agents_md_is_offered_last_and_its_facts_go_to_the_global_store(
        home: Path, files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from realmem.interface import tools

    agent_dir = tmp_path / "pi-agent"  # Pi's directory, moved as Pi itself allows
    agent_dir.mkdir()
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent_dir))
    own = agent_dir / "AGENTS.md"
    own.write_text(GLOBAL, encoding="utf-8")
    with open_app(home, files, "s1") as a:
        res = importer.begin(a, [])
        assert res["files"] == [str(files / "AGENTS.md"), str(files / "CLAUDE.md"), str(own)]
        a.emit([])  # nothing stored from the project's files in this run
        importer.finish(a)
        last = importer.finish(a)
        assert last["prompt"] is not None and "global context file" in last["prompt"] and GLOBAL in last["prompt"]
        out = tools.remember(a, caption="Prefer pnpm over npm", content="Use pnpm, not npm, in every project.",
                             user_requested=True)  # scope left out, as the instruction says
        assert a.memory(a.resolve(out["details"]["id"])).store == "global"  # type: ignore[union-attr]
        done = importer.finish(a)
        assert done["imported"] == [str(own)]
    # Another project's session: the fact is there, and Pi's block of the file is cut.
    other = files.parent / "other"
    other.mkdir()
    with open_app(home, other, "s2") as b:
        assert [m.caption for m in b.memories()] == ["Prefer pnpm over npm"]
        assert prompt.stripped_files(b) == [str(own)]
        system = f"base{prompt.CONTEXT_HEADER}## {own}\n\n{GLOBAL}\n\nrest"
        cut, stripped = prompt.strip_context_files(b, system, [{"path": str(own), "content": GLOBAL}])
        assert stripped == [str(own)] and GLOBAL not in cut


def test_a_headless_import_of_the_global_file_stores_global_facts(home: Path, files: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  servers: tuple[FakeSystemOne, FakeChat]) -> None:
    _, chat = servers
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "pi-agent"))
    own = tmp_path / "pi-agent" / "AGENTS.md"
    own.parent.mkdir()
    own.write_text(GLOBAL, encoding="utf-8")
    chat.script([facts_json({"caption": "Answer tersely", "content": "Keep answers short.", "paths": []})])
    with open_app(home, files, "cli") as a:
        rep = importer.import_headless(a, [str(own)], word=outcome_text)
        assert rep["files"] == [str(own)] and rep["stored"] == 1
        assert [m.store for m in a.memories()] == ["global"]


# --- a teammate's clone ------------------------------------------------------------------------------

def test_a_teammate_who_pulls_the_shared_facts_gets_the_imported_file_stripped(
        home: Path, files: Path, tmp_path: Path, git, servers: tuple[FakeSystemOne, FakeChat]) -> None:  # type: ignore[no-untyped-def]
    """The import is recorded in the shared store (.pi/realmem/.imported, committed with the
    facts), so a clone on another machine (another REALMEM_HOME) strips AGENTS.md too, and
    stops as soon as the file changes."""
    _, chat = servers
    chat.script([facts_json({"caption": "Run make test before pushing", "content": "Run `make test` before every push.",
                             "paths": []})])
    with open_app(home, files, "cli") as a:
        rep = importer.import_headless(a, ["AGENTS.md"], word=outcome_text)
        assert rep["stored"] == 1
    marker = files / ".pi" / "realmem" / ".imported"
    assert marker.read_text(encoding="utf-8") == f"{prompt.file_hash(AGENTS)} AGENTS.md\n"
    git(files, "add", "-A")
    git(files, "commit", "-q", "-m", "import AGENTS.md")
    clone = tmp_path / "teammate"
    git(tmp_path, "clone", "-q", str(files), str(clone))
    with open_app(tmp_path / "teammate-home", clone, "t1") as b:
        assert [m.caption for m in b.memories()] == ["Run make test before pushing"]
        assert prompt.imported(b, str(clone / "AGENTS.md"), AGENTS)
        assert prompt.stripped_files(b) == [str(clone / "AGENTS.md")]
        assert not prompt.imported(b, str(clone / "CLAUDE.md"), CLAUDE)  # never imported
        assert not prompt.imported(b, str(clone / "AGENTS.md"), AGENTS + "\nA new rule.\n")  # changed since


def test_an_import_whose_facts_are_all_personal_is_not_recorded_for_teammates(
        home: Path, files: Path, servers: tuple[FakeSystemOne, FakeChat]) -> None:
    _, chat = servers
    chat.script([facts_json({"caption": "My editor is vim", "content": "I edit with vim here.", "paths": [],
                             "scope": "personal"})])
    with open_app(home, files, "cli") as a:
        assert importer.import_headless(a, ["AGENTS.md"], word=outcome_text)["stored"] == 1
        assert prompt.imported(a, str(files / "AGENTS.md"), AGENTS)  # this machine strips it
    assert not (files / ".pi" / "realmem" / ".imported").exists()  # a teammate has not got the facts
