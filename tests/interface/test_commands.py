"""The command layer called directly: each command function returns the text the CLI prints
and the details the rpc child replies with.  Real SQLite, a real git repository, fake servers
on loopback where a command reaches the network."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from realmem import errors
from realmem.interface import commands, settings, tools
from realmem.stores import ids
from realmem.write import memories
from realmem.app import Realmem, RealmemError
from realmem.config import Config
from realmem.fakes import FakeEmbeddings
from realmem.write.attached import open_attached

@pytest.fixture
def app(home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Realmem]:
    """The repository's project with a src/ directory; no worker starts behind the test."""
    monkeypatch.setenv("REALMEM_WORKER_AUTOSTART", "0")
    (repo / "src").mkdir()
    with open_attached(home, repo, session="s1") as opened:
        yield opened


def add(app: Realmem, caption: str, paths: list[str]):  # type: ignore[no-untyped-def]
    return memories.add(app, caption, f"Details about {caption}.", store=app.project.shared_store,
                        stored_paths=paths, source="add")


# --- reading ----------------------------------------------------------------------------------

def test_recall_text_is_the_tools_and_details_say_more(app: Realmem) -> None:
    m = add(app, "Migrations live in src/db", ["src"])
    found = commands.recall(app, queries=["migrations"])
    assert found["text"].startswith("1 memory") and "Migrations live in src/db" in found["text"]
    assert "used 1" in found["text"] and found["failed"] is False  # the hit is counted
    assert tools.recall(app, queries=["migrations"])["text"].replace("used 2", "used 1") == found["text"]
    d = found["details"]
    assert (d["page"], d["pages"], d["total"], d["message"]) == (1, 1, 1, None)
    assert [i["id"] for i in d["items"]] == [ids.short(m.id)]
    assert set(d["items"][0]) >= {"path_class", "stale"} and d["errors"] == []


def test_recall_of_an_unknown_id_fails_after_printing(app: Realmem) -> None:
    found = commands.recall(app, id_values=["AAAAAAAAAAAAAAAAAAAAAA"])
    assert found["failed"] is True and found["details"]["items"] == [] and found["text"]
    assert commands.recall(app, queries=["nothing like this"])["failed"] is False  # no match is not a failure


def test_listing_is_a_table_with_a_page_line(app: Realmem) -> None:
    assert commands.listing(app) == {"text": "No memories yet.",
                                     "details": {"items": [], "page": 1, "pages": 1, "total": 0}}
    a, b = add(app, "Build with make", ["."]), add(app, "Migrations live in src/db", ["src"])
    listed = commands.listing(app)
    lines = listed["text"].splitlines()
    assert lines[0].split() == ["id", "scope", "paths", "used", "caption"]
    assert lines[-1] == "page 1 of 1 · 2 memories"
    assert {i["id"] for i in listed["details"]["items"]} == {ids.short(a.id), ids.short(b.id)}
    assert listed["details"]["total"] == 2
    past = commands.listing(app, page=5)
    assert past["text"].startswith("There is no page 5") and past["details"]["items"] == []


def test_show_text_has_every_metadata_line(app: Realmem) -> None:
    m = add(app, "Build with make", ["."])
    shown = commands.show_text(app, ids.short(m.id))
    lines = shown["text"].splitlines()
    assert lines[0] == f"{ids.short(m.id)}  Build with make"
    assert lines[1].startswith("scope shared · paths ") and lines[1].endswith("used 0 · shown 0")
    assert lines[2].startswith("file ") and lines[-1] == "Details about Build with make."
    assert shown["details"] == commands.show(app, ids.short(m.id))["details"]
    with pytest.raises(RealmemError):
        commands.show_text(app, "nosuchid")


def test_manage_list_glyph_table(app: Realmem) -> None:
    assert commands.manage_list(app) == {"text": "No memories.", "details": {"items": [], "conflicts": None}}
    m = add(app, "Build with make", ["src"])
    listed = commands.manage_list(app)
    row = next(line for line in listed["text"].splitlines() if "Build with make" in line)
    assert row.startswith("?") and ids.short(m.id) in row  # ? unjudged urgency
    assert listed["details"]["items"][0]["id"] == ids.short(m.id)


def test_check_paths_warns_only_for_missing(app: Realmem, repo: Path) -> None:
    checked = commands.check_paths(app, ["src", "README.md", "later/new.py", "*.md"])
    kinds = [i["kind"] for i in checked["details"]["items"]]
    assert kinds == ["dir", "file", "missing", "glob"]
    assert checked["details"]["invalid"] == [] and len(checked["details"]["warnings"]) == 1
    assert checked["text"] == f"warning: {checked['details']['warnings'][0]}"
    assert commands.check_paths(app, ["src"])["text"] == ""


def test_scan_records_a_hand_written_file(app: Realmem, repo: Path) -> None:
    assert commands.scan(app) == {"text": "0 changes recorded.", "details": {"changes": 0}}
    (repo / ".pi" / "realmem").mkdir(parents=True, exist_ok=True)
    fact = (f"---\nid: {ids.new_id()}\ncaption: Deploy with make ship\npaths:\n  - src\n"
            "created: 2026-01-01T00:00:00.000Z\nupdated: 2026-01-01T00:00:00.000Z\n---\n\n"
            "`make ship` deploys to staging first.\n")
    (repo / ".pi" / "realmem" / "deploy.md").write_text(fact, encoding="utf-8")
    assert commands.scan(app) == {"text": "1 change recorded.", "details": {"changes": 1}}


# --- writing ----------------------------------------------------------------------------------

def test_remember_names_the_action(app: Realmem, servers) -> None:  # type: ignore[no-untyped-def]
    out = commands.remember(app, caption="Run tests with make test", content="`make test` runs them.",
                            paths=["."], user_requested=True, source="add")
    d = out["details"]
    assert d["action"] == "add" and d["text"] == out["text"] and d["id"] and d["queued"] is False
    assert app.memory(app.resolve(d["id"])) is not None
    with pytest.raises(RealmemError, match="NUL"):  # not storable: refused before the gate
        commands.remember(app, caption="Token", content="x\x00y")


def test_consolidate_and_its_cancelled_report(app: Realmem, servers) -> None:  # type: ignore[no-untyped-def]
    add(app, "Build with make", ["."])
    done = commands.consolidate(app, stores=["shared"], revise_paths=False)
    assert done["details"]["cancelled"] is False and done["details"]["reviewed"] >= 1 and done["text"]
    cancelled = commands.consolidate_cancelled(app, ["shared"])
    assert cancelled["details"]["cancelled"] is True and cancelled["details"]["changes"] == []
    assert cancelled["details"]["stores"] == [app.project.shared_store]
    assert "cancel" in cancelled["text"].lower()


def test_import_without_context_files_is_refused(app: Realmem) -> None:
    with pytest.raises(RealmemError, match="no AGENTS.md or CLAUDE.md"):
        commands.import_files(app, [])


# --- gitignore --------------------------------------------------------------------------------

def test_gitignore_check_and_fix(app: Realmem, repo: Path) -> None:
    ok = commands.gitignore_check(app)
    assert ok == {"text": ".pi/realmem is not ignored by git: shared memories will be committed.",
                  "details": {"ignored": False, "warning": None, "fix": None}}
    assert commands.gitignore_fix(app)["details"] == {"ignored": False}
    (repo / ".gitignore").write_text(".pi/\n", encoding="utf-8")
    checked = commands.gitignore_check(app)
    d = checked["details"]
    assert d["ignored"] is True and d["fix"]["file"].endswith(".gitignore") and d["fix"]["lines"]
    assert checked["text"] == d["warning"] and "Fix: realmem fix-gitignore" in checked["text"]
    offered = commands.gitignore_check(app, offer_fix=True)["text"].splitlines()
    assert "Fix: realmem" not in offered[0] and offered[1] == f"Fix: append to {d['fix']['file']}:"
    assert offered[2:] == [f"  {line}" for line in d["fix"]["lines"]]
    fixed = commands.gitignore_fix(app)
    assert fixed == {"text": f"Appended to {d['fix']['file']}: {', '.join(d['fix']['lines'])}",
                     "details": {"ignored": False}}
    assert commands.gitignore_check(app)["details"]["ignored"] is False


def test_gitignore_check_outside_git(home: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with open_attached(home, plain) as app:
        checked = commands.gitignore_check(app)
    assert checked["text"] == "Not a git repository: nothing to check."
    assert checked["details"] == {"ignored": False, "warning": None, "fix": None}


# --- settings ---------------------------------------------------------------------------------

def test_settings_show_set_unset_save(home: Path) -> None:
    cfg = Config(home)
    shown = settings.show(cfg)
    assert shown["text"].splitlines()[0].split() == ["section", "key", "value", "source"]
    assert shown["details"]["groups"] == list(settings.GROUPS)
    assert {i["key"] for i in shown["details"]["items"]} >= {"gate.importance", "semif.url"}
    assert settings.set_value(cfg, "pathNotes.maxFull", "5") == {"text": "pathNotes.maxFull set.",
                                                                  "details": {"key": "pathNotes.maxFull"}}
    assert Config(home)["pathNotes.maxFull"] == 5
    assert settings.unset(cfg, "pathNotes.maxFull")["text"] == "pathNotes.maxFull reset to its default."
    assert settings.save(cfg, "pathNotes.maxFull", "4")["text"] == "pathNotes.maxFull saved."
    assert Config(home)["pathNotes.maxFull"] == 4
    assert settings.save(cfg, "pathNotes.maxFull", "")["text"] == "pathNotes.maxFull saved."
    assert Config(home).source("pathNotes.maxFull") == "default"


def test_settings_typos_are_usage_errors(home: Path) -> None:
    cfg = Config(home)
    for call in (lambda: settings.set_value(cfg, "gate.importanc", "1"), lambda: settings.unset(cfg, "gate.importanc")):
        with pytest.raises(errors.Error) as info:
            call()
        assert errors.code_of(info.value) == errors.USAGE
        assert str(info.value) == "unknown setting 'gate.importanc'; see `realmem settings show`"
    with pytest.raises(errors.Error) as info:
        settings.set_value(cfg, "pathNotes.maxFull", "many")
    assert errors.code_of(info.value) == errors.USAGE


def test_settings_models_and_connectivity(home: Path) -> None:
    cfg = Config(home)
    with FakeEmbeddings(models=["emb-1", "emb-2"]) as emb:
        cfg.set("embedding.url", emb.url)
        assert settings.models(cfg, "embedding") == {"text": "emb-1\nemb-2", "details": {"models": ["emb-1", "emb-2"]}}
        tested = settings.connectivity(cfg)
    results = {r["endpoint"]: r for r in tested["details"]["results"]}
    assert tested["failed"] is True and results["semif"]["ok"] is False  # no judge set: candidates queue
    assert tested["text"].splitlines()[0].startswith("FAIL  semif")
