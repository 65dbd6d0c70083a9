"""The `realmem` command line as scripts use it: real subprocesses with --home and --cwd,
JSON field names, exit codes (0 ok, 1 refused or not found, 2 usage error)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from realmem.storage import db
from realmem.stores import ids
from realmem.write import memories
from realmem.write.attached import open_attached

from helpers.cli import as_json, ok, run

FIELDS = {"id", "caption", "content", "scope", "paths", "used_count"}


@pytest.fixture
def facts(home: Path, repo: Path):
    with open_attached(home, repo) as app:
        made = []
        for caption, content, scope, paths in [
            ("Run e2e tests with pnpm test:e2e", "Needs Docker running.", "shared", ["packages/web"]),
            ("Local Postgres listens on 5433", "5432 is the system one.", "personal", None),
            ("Prefer ripgrep over grep", "rg is faster.", "global", None),
        ]:
            store, stored = memories.place(app, scope, paths)
            made.append(memories.add(app, caption, content, store=store, stored_paths=stored, source="add"))
    return made


def test_list_and_show_json_fields(home: Path, repo: Path, facts) -> None:
    data = as_json(home, repo, "list")
    assert data["total"] == 3 and data["page"] == 1
    items = {i["caption"]: i for i in data["items"]}
    for m in facts:
        item = items[m.caption]
        assert FIELDS <= set(item)
        assert item["id"] == ids.short(m.id) and len(item["id"]) == 22
        assert (item["content"], item["paths"], item["used_count"]) == (m.content, m.paths, 0)
    assert {i["scope"] for i in data["items"]} == {"shared", "personal", "global"}
    assert as_json(home, repo, "list", "--scope", "personal")["total"] == 1
    # show accepts the short id, the canonical id and a unique prefix
    m = facts[0]
    for value in (ids.short(m.id), m.id):
        shown = as_json(home, repo, "show", value)
        assert FIELDS <= set(shown)
        assert (shown["id"], shown["caption"], shown["scope"], shown["paths"]) == (
            ids.short(m.id), m.caption, "shared", ["packages/web"])
    text = ok(home, repo, "show", ids.short(m.id)).stdout
    assert m.caption in text and m.content in text
    plain = ok(home, repo, "list").stdout
    assert all(ids.short(x.id) in plain for x in facts)


def test_not_found_and_usage_exit_codes(home: Path, repo: Path, facts) -> None:
    p = run(home, repo, "show", "nonexistent")
    assert p.returncode == 1 and "no memory" in p.stderr
    p = run(home, repo, "show", "AAAAAAAAAAAAAAAAAAAAAA")
    assert p.returncode == 1
    common = os.path.commonprefix([ids.short(m.id) for m in facts])
    p = run(home, repo, "show", common)
    assert p.returncode == 1 and "ambiguous" in p.stderr
    assert all(ids.short(m.id) in p.stderr for m in facts)
    assert run(home, repo, "forget", "nonexistent").returncode == 1
    assert run(home, repo, "list", "--bogus").returncode == 2
    assert run(home, repo, "no-such-command").returncode == 2
    assert run(home, repo, "show").returncode == 2
    assert run(home, repo, "list", "--scope", "team").returncode == 2
    assert run(home, repo, "list", "--page", "x").returncode == 2
    assert run(home, repo, "recall", "--id", "nonexistent").returncode == 1


def test_forget(home: Path, repo: Path, facts) -> None:
    m = facts[0]
    path = repo / ".pi" / "realmem" / m.file
    assert path.is_file()
    p = ok(home, repo, "forget", ids.short(m.id))
    assert ids.short(m.id) in p.stdout
    assert not path.exists()
    assert run(home, repo, "show", ids.short(m.id)).returncode == 1
    assert as_json(home, repo, "list")["total"] == 2
    assert ok(home, repo, "replay", "--check").returncode == 0


def test_recall_json_and_hits(home: Path, repo: Path, facts) -> None:
    data = as_json(home, repo, "recall", "postgres")
    assert data["total"] == 1 and data["errors"] == []
    item = data["items"][0]
    assert FIELDS <= set(item)
    assert item["caption"] == "Local Postgres listens on 5433" and item["used_count"] == 1
    assert as_json(home, repo, "show", item["id"])["used_count"] == 1
    data = as_json(home, repo, "recall", "--id", ids.short(facts[2].id))
    assert [i["id"] for i in data["items"]] == [ids.short(facts[2].id)]
    data = as_json(home, repo, "recall", "--path", "packages/web/src/app.ts")
    assert [i["id"] for i in data["items"]] == [ids.short(facts[0].id)]
    assert as_json(home, repo, "recall", "grep", "--scope", "shared")["items"] == []
    assert "No memory matches" in ok(home, repo, "recall", "xylophone").stdout


def test_replay_check_detects_tampering(home: Path, repo: Path, facts) -> None:
    p = ok(home, repo, "replay", "--check")
    assert "identical" in p.stdout
    conn = db.connect(home / "realmem.sqlite")
    conn.execute("UPDATE counters SET used_count = used_count + 7 WHERE id = ?", (facts[0].id,))
    conn.close()
    p = run(home, repo, "replay", "--check")
    assert p.returncode == 1 and "counters" in p.stdout
    ok(home, repo, "replay")
    assert as_json(home, repo, "show", ids.short(facts[0].id))["used_count"] == 0
    assert run(home, repo, "replay", "--check").returncode == 0


def test_audit_and_events(home: Path, repo: Path, facts) -> None:
    m = facts[0]
    with open_attached(home, repo) as app:
        memories.edit(app, (m.store, m.id), content="Needs Docker and 4 GB of RAM.")
        memories.reinforce(app, (m.store, m.id))
    p = ok(home, repo, "audit", ids.short(m.id))
    lines = p.stdout.splitlines()
    assert len(lines) == 3
    assert "memory_added" in lines[0] and "memory_edited" in lines[1] and "reinforced" in lines[2]
    data = as_json(home, repo, "audit", m.id)
    assert [e["type"] for e in data] == ["memory_added", "memory_edited", "reinforced"]
    assert data[1]["payload"]["fields"]["content"] == "Needs Docker and 4 GB of RAM."
    assert all(e["memory_id"] == ids.short(m.id) for e in data)
    assert run(home, repo, "audit", "nonexistent").returncode == 1
    # a forgotten memory can still be audited
    ok(home, repo, "forget", ids.short(m.id))
    assert as_json(home, repo, "audit", ids.short(m.id))[-1]["type"] == "memory_forgotten"

    events = as_json(home, repo, "events")
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert {"seq", "time", "type", "payload"} <= set(events[0])
    assert "store_registered" in {e["type"] for e in events}
    later = as_json(home, repo, "events", "--since", str(seqs[-3]))
    assert [e["seq"] for e in later] == seqs[-2:]
    assert ok(home, repo, "events").stdout.count("\n") == len(events)


def test_settings_set_and_show(home: Path, repo: Path) -> None:
    ok(home, repo, "settings", "set", "semif.key", "$MY_SEMIF_KEY")
    ok(home, repo, "settings", "set", "embedding.key", "sk-verysecretvalue1234")
    ok(home, repo, "settings", "set", "recall.pageSize", "5")
    cfg = home / "config.json"
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600
    data = json.loads(cfg.read_text())
    assert data["semif.key"] == "$MY_SEMIF_KEY" and data["recall.pageSize"] == 5
    shown = as_json(home, repo, "settings", "show")
    # an unset variable is never shown as a working key
    assert shown["semif.key"] == {"value": "$MY_SEMIF_KEY", "source": "file",
                                  "problem": "missing: $MY_SEMIF_KEY is not set"}
    assert shown["embedding.key"]["value"] == "****1234"
    assert shown["recall.pageSize"] == {"value": 5, "source": "file"}
    assert shown["rewriter.key"]["value"] == ""
    text = ok(home, repo, "settings", "show").stdout
    assert "missing: $MY_SEMIF_KEY is not set" in text and "****1234" in text
    assert "Endpoints" in text and "Judge thresholds" in text
    p = run(home, repo, "settings", "show", "--json", env={"MY_SEMIF_KEY": "set-now"})
    assert json.loads(p.stdout)["semif.key"] == {"value": "$MY_SEMIF_KEY", "source": "file"}
    assert "verysecret" not in text and "verysecret" not in json.dumps(shown)
    # environment overrides win and are named as such
    p = run(home, repo, "settings", "show", "--json", env={"REALMEM_RECALL_PAGESIZE": "9"})
    assert json.loads(p.stdout)["recall.pageSize"] == {"value": 9, "source": "env"}
    # usage errors
    assert run(home, repo, "settings", "set", "no.such.key", "1").returncode == 2
    assert run(home, repo, "settings", "set", "recall.pageSize", "many").returncode == 2
    assert run(home, repo, "settings", "set", "semif.key").returncode == 2
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600


def test_settings_set_refuses_out_of_range_values_in_words(home: Path, repo: Path) -> None:
    """A judge threshold is a probability: 35 (meant as percent) would silently reject every
    memory.  A value of the wrong type is named in the setting's words, not Python's."""
    for key, value, message in [
        ("gate.importance", "35", "realmem: gate.importance must be between 0 and 1, not 35.0\n"),
        ("consolidate.revise", "-0.1", "realmem: consolidate.revise must be between 0 and 1, not -0.1\n"),
        ("gate.importance", "abc", 'realmem: gate.importance must be a number, not "abc"\n'),
        ("recall.pageSize", "1.5", 'realmem: recall.pageSize must be a whole number, not "1.5"\n'),
    ]:
        p = run(home, repo, "settings", "set", "--", key, value)
        assert (p.returncode, p.stderr) == (2, message), (key, value)
    assert not (home / "config.json").exists() or "gate.importance" not in (home / "config.json").read_text()
    ok(home, repo, "settings", "set", "gate.importance", "1")
    ok(home, repo, "settings", "set", "consolidate.minImportance", "0")


def test_status_store_counts_line_up(home: Path, repo: Path, facts) -> None:
    """The per-store lines are a table: counts right-aligned in one column, nouns and store
    directories each starting in one column, whatever the plural."""
    with open_attached(home, repo) as app:
        store, stored = memories.place(app, "shared", None)
        memories.add(app, "Lint with ruff", "ruff check .", store=store, stored_paths=stored, source="add")
    lines = [line for line in ok(home, repo, "status").stdout.splitlines()
             if line.lstrip().startswith(("shared ", "personal ", "global "))]
    assert [line.split()[1:3] for line in lines] == [["2", "memories"], ["1", "memory"], ["1", "memory"]]
    for column in (lambda l: l.index(l.split()[1]) + len(l.split()[1]),  # end of the count
                   lambda l: l.index(" memor") + 1, lambda l: l.index("/")):
        assert len({column(line) for line in lines}) == 1, lines


def test_settings_unset_of_a_mistyped_key_says_so(home: Path, repo: Path) -> None:
    """"reset to its default" for a typo would hide that the meant setting is still set; a key
    that config.json holds but realmem no longer knows can still be removed."""
    ok(home, repo, "settings", "set", "gate.importance", "0.9")
    p = run(home, repo, "settings", "unset", "gate.importanc")
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == "realmem: unknown setting 'gate.importanc'; see `realmem settings show`\n"
    assert json.loads((home / "config.json").read_text())["gate.importance"] == 0.9
    data = json.loads((home / "config.json").read_text())
    (home / "config.json").write_text(json.dumps({**data, "old.setting": 1}))
    assert ok(home, repo, "settings", "unset", "old.setting").stdout == "old.setting removed from config.json.\n"
    assert ok(home, repo, "settings", "unset", "gate.importance").stdout == "gate.importance reset to its default.\n"
    assert json.loads((home / "config.json").read_text()) == {}


def test_fix_gitignore_shows_the_fix_once(home: Path, repo: Path) -> None:
    """The command itself says what it appends; the warning does not also tell the user to run
    "/realmem fix-gitignore" (a Pi command) from inside that very command."""
    (repo / ".gitignore").write_text(".pi/\n", encoding="utf-8")
    p = ok(home, repo, "fix-gitignore", "--yes")
    assert p.stdout == ("Shared memories in .pi/realmem are ignored by git (.gitignore:1: .pi/) and will not be "
                        "committed.\n"
                        f"Fix: append to {repo / '.gitignore'}:\n"
                        "  !/.pi/\n  /.pi/*\n  !/.pi/realmem/\n  !/.pi/realmem/**\n"
                        "Fixed: .pi/realmem is no longer ignored.\n")


# --- --max-questions ----------------------------------------------------------------------------

def judge_requests(s1) -> list[int]:  # type: ignore[no-untyped-def]
    """Questions per System One request the fake received."""
    return [len(r.body["questions"]) for r in s1.requests if r.path == "/v1/systemone"]


def test_max_questions_overrides_the_setting_for_remember_debug_and_consolidate(home: Path, repo: Path,
                                                                                servers):  # type: ignore[no-untyped-def]
    s1, _, _ = servers
    with open_attached(home, repo) as app:
        memories.add(app, "Build with make", "`make` builds everything.", store=app.project.shared_store,
                     stored_paths=["."], source="add")
    env = {"REALMEM_SEMIF_MAXQUESTIONS": "8"}  # the flag wins over the environment too
    p = run(home, repo, "remember", "--caption", "Run tests with make test", "--content", "`make test` runs them.",
            "--max-questions", "2", env=env)
    assert p.returncode == 0, p.stderr
    sizes = judge_requests(s1)
    assert max(sizes) == 2 and len(sizes) >= 4

    s1.reset()
    trace = json.loads(run(home, repo, "debug", "--caption", "Lint with ruff", "--content", "`ruff check .`",
                           "--max-questions", "3", "--json", env=env).stdout)["trace"]
    sizes = judge_requests(s1)
    assert max(sizes) == 3 and trace["judge"]["requests"] == len(sizes) == -(-sum(sizes) // 3)

    s1.reset()
    p = run(home, repo, "consolidate", "--no-paths", "--max-questions", "2", env=env)
    assert p.returncode == 0, p.stderr
    sizes = judge_requests(s1)
    assert sizes and max(sizes) == 2

    s1.reset()  # without the flag, the setting applies again
    assert run(home, repo, "debug", "--caption", "Lint with ruff", "--content", "`ruff check .`",
               env=env).returncode == 0
    assert max(judge_requests(s1)) > 3


def test_max_questions_for_the_worker(home: Path, repo: Path, servers, monkeypatch):  # type: ignore[no-untyped-def]
    s1, _, _ = servers
    monkeypatch.setenv("REALMEM_QUEUE_BASEBACKOFFSECONDS", "0")  # due at once
    s1.down()
    with open_attached(home, repo) as app:
        from realmem.gate.remember import remember
        assert remember(app, "Run tests with make test", "`make test` runs them.").queued
    s1.up()
    p = run(home, repo, "worker", "--idle", "0.2", "--max-questions", "2")
    assert p.returncode == 0, p.stderr
    sizes = judge_requests(s1)
    assert sizes and max(sizes) == 2
    with open_attached(home, repo) as app:
        assert app.conn.execute("SELECT count(*) FROM pending").fetchone()[0] == 0


def test_max_questions_must_be_positive(home: Path, repo: Path):
    p = run(home, repo, "remember", "--caption", "c", "--content", "t", "--max-questions", "0")
    assert p.returncode == 2 and "--max-questions" in p.stderr


# --- status: the rewriter -----------------------------------------------------------------------

def test_status_names_the_pi_bridge_as_the_rewriter(home: Path, repo: Path):
    line = lambda p: next(ln for ln in p.stdout.splitlines() if ln.strip().startswith("rewriter"))  # noqa: E731
    assert "not set: Edit/Merge use a deterministic fallback" in line(ok(home, repo, "status"))
    # the adapter publishes its bridge as <home>/bridge/<pid>.json while its process lives
    (home / "bridge").mkdir()
    bridge_file = home / "bridge" / f"{os.getpid()}.json"
    bridge_file.write_text(json.dumps({"url": "http://127.0.0.1:9", "token": "t", "pid": os.getpid()}))
    assert line(ok(home, repo, "status")).split() == ["rewriter", "Pi's", "current", "model", "(bridge)"]
    assert as_json(home, repo, "status")["endpoints"]["rewriter"]["bridge"] is True
    # an explicit rewriter.url wins over the bridge
    p = run(home, repo, "status", env={"REALMEM_REWRITER_URL": "http://127.0.0.1:8"})
    assert line(p).split()[:2] == ["rewriter", "http://127.0.0.1:8"]
    # a bridge file whose process is gone is not a bridge
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    bridge_file.rename(home / "bridge" / f"{dead.pid}.json")
    (home / "bridge" / f"{dead.pid}.json").write_text(json.dumps({"url": "http://127.0.0.1:9", "token": "t",
                                                                  "pid": dead.pid}))
    assert "not set" in line(ok(home, repo, "status"))


# --- logs never reach the terminal unless asked for ---------------------------------------------

def test_a_user_error_prints_one_line_and_the_log_goes_to_the_log_file(home: Path, repo: Path, monkeypatch):  # type: ignore[no-untyped-def]
    from realmem.fakes import FakeSystemOne
    with FakeSystemOne(key="the-right-key") as s1:
        env = {"REALMEM_SEMIF_URL": s1.url, "REALMEM_SEMIF_KEY": "$RM_UNSET_KEY", "REALMEM_WORKER_AUTOSTART": "0"}
        monkeypatch.delenv("RM_UNSET_KEY", raising=False)
        p = run(home, repo, "settings", "models", "semif", env=env)
        assert p.returncode == 1
        assert p.stderr.splitlines() == [
            f"realmem: authentication failed (401) for {s1.url}/v1/models: semif.key is $RM_UNSET_KEY (from "
            "REALMEM_SEMIF_KEY), but RM_UNSET_KEY is not set in realmem's environment"]
        # a remember the judge refuses is queued; the warning is logged, not printed
        p = run(home, repo, "remember", "--caption", "Build with make", "--content", "`make` builds it.", env=env)
        assert p.returncode == 0 and p.stderr == ""
        assert p.stdout.startswith("Queued: the SemIf judge refused the request (authentication failed (401)")
        logged = [json.loads(line) for line in (home / "realmem.log").read_text().splitlines()]
        assert [e["event"] for e in logged].count("endpoint.error") == 2
        assert stat.S_IMODE((home / "realmem.log").stat().st_mode) == 0o600
        # --verbose: the log on stderr instead
        p = run(home, repo, "--verbose", "settings", "models", "semif", env=env)
        assert p.returncode == 1
        events = [json.loads(line)["event"] for line in p.stderr.splitlines() if line.startswith("{")]
        assert "endpoint.error" in events and p.stderr.splitlines()[-1].startswith("realmem: authentication failed")


def test_add_warns_about_paths_that_name_nothing(home: Path, repo: Path) -> None:
    """Like the /realmem add screen's paths step: a path or glob that names nothing (a typo, or
    a file not written yet) is kept, with a warning on stderr; a path that exists gets none."""
    (repo / "src").mkdir()
    (repo / "src" / "db.py").write_text("x\n", encoding="utf-8")
    p = ok(home, repo, "add", "--caption", "Pool size is 20", "--content", "The pool in src/db.py holds 20.",
           "--path", "src/db.py", "--path", "src/nope", "--path", "src/**/*.rs")
    assert p.stdout.startswith("Stored [")
    assert p.stderr.splitlines() == ["warning: src/nope: does not exist (yet)",
                                     "warning: src/**/*.rs: no file matches this glob (yet)"]
    data = json.loads(ok(home, repo, "list", "--json").stdout)
    assert sorted(data["items"][0]["paths"]) == ["src/**/*.rs", "src/db.py", "src/nope"]  # kept
    quiet = ok(home, repo, "add", "--caption", "Db module opens apsw", "--content", "src/db.py uses apsw.",
               "--path", "src/db.py", "--path", "src")
    assert quiet.stderr == ""
