"""Hostile request lines over the real child's stdio (issue 10, item 6).

Hypothesis writes request lines of every shape (wrong types, deep nesting, huge strings,
lone surrogates, NULs, bad ids and tokens, garbage) into one long-lived `realmem rpc` child.
After each line the child must still answer: the line itself when it carries an id, and a
`hello` on the main thread and a `recall` on the slow-method thread.  Timeouts are hang
guards only.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.rpc_child import Child, child_env, spawn  # noqa: F401  (fixtures)

METHODS = ["hello", "session_start", "prompt_section", "strip_context_files", "path_notes", "recall", "remember",
           "status", "list", "show", "manage_list", "edit", "move", "approve", "apply_suggested_path",
           "settings_get", "settings_models", "debug", "import_finish", "prune_paths", "gitignore_check",
           "embed", "retry", "consolidate", "no_such_method"]
PARAM_NAMES = ["cwd", "session", "progress_token", "caption", "content", "scope", "paths", "queries", "ids", "page",
               "id", "user_requested", "write", "tool_name", "input", "shown", "recent_paths", "query",
               "semantic", "endpoint", "apply", "stores", "system_prompt", "context_files", "path", "key", "value"]

texts = st.one_of(st.text(max_size=40), st.sampled_from(["\ud800", "a\x00b", "\udfff tail", "", " ", "../..",
                                                          "x" * 70_000]))
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                    st.floats(allow_nan=False, allow_infinity=False), texts)
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                           max_leaves=12)


_ids = itertools.count(10_000)  # a fresh id per line: a repeated id would match an old reply


def deep(n: int) -> str:
    return "[" * n + "]" * n


@st.composite
def request_lines(draw: st.DrawFn, repo: Path) -> tuple[str, Any]:
    """(line, id the child must answer, or None when only an id-less error is due)."""
    kind = draw(st.sampled_from(["request", "request", "request", "raw", "deep", "notobject"]))
    if kind == "raw":
        return draw(st.sampled_from(["{not json", "}", "\"unterminated", "nul\x00", "[1,2", "{\"a\":}",
                                     "1" * 5000, "\udcff"])), None
    if kind == "deep":
        n = draw(st.sampled_from([5000, 100_000]))
        return f'{{"jsonrpc":"2.0","id":1,"method":"recall","params":{{"queries":{deep(n)}}}}}', None
    if kind == "notobject":
        return json.dumps(draw(st.one_of(st.lists(scalars, max_size=3), scalars))), None
    mid = next(_ids)
    method = draw(st.sampled_from(METHODS))
    params = draw(st.dictionaries(st.sampled_from(PARAM_NAMES), json_values, max_size=6))
    if draw(st.booleans()):
        params["cwd"] = str(repo)
    elif draw(st.booleans()):
        params["cwd"] = str(repo / "does" / "not" / "exist")
    msg = {"jsonrpc": "2.0", "id": mid, "method": method, "params": params}
    return json.dumps(msg, ensure_ascii=draw(st.booleans())), mid


class Probe:
    def __init__(self, child: Child) -> None:
        self.c = child
        self.n = 0

    def alive(self) -> None:
        """Both serving threads still answer."""
        self.n += 1
        assert self.c.call("hello")["pid"] == self.c.proc.pid
        # recall is served on the slow-method thread
        assert "items" in self.c.call("recall", {"cwd": str(self.c.home.parent / "repo"), "queries": ["x"]})["details"]

    def id_less_errors(self) -> int:
        with self.c.cond:
            return sum(1 for line in self.c.raw if json.loads(line).get("id") is None)


def test_the_child_answers_every_line_and_stays_alive(spawn: Any, repo: Path, tmp_path: Path) -> None:  # noqa: F811
    c = spawn(REALMEM_WORKER_AUTOSTART="0")
    probe = Probe(c)
    probe.alive()

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(request_lines(repo))
    def run(case: tuple[str, Any]) -> None:
        line, mid = case
        before = probe.id_less_errors()
        c.send_raw(line.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
        if mid is not None:
            msg = c.response(mid)
            assert ("result" in msg) != ("error" in msg), msg
            if "error" in msg:
                assert msg["error"]["code"] in (-32700, -32600, -32601, -32602, 1, 2), msg  # never 3: no bug
        else:
            c.wait_for(lambda: probe.id_less_errors() > before, "an error reply to a line without an id")
        probe.alive()
        assert c.proc.poll() is None

    run()
    assert not (repo / "does").exists()  # a missing cwd is never created
    assert c.close() == 0


def test_the_reported_killers(spawn: Any, repo: Path, home: Path) -> None:  # noqa: F811
    """The exact lines that killed or silenced the child on main."""
    c = spawn(REALMEM_WORKER_AUTOSTART="0")
    for token in ([1], {"a": 1}, 5, True):
        err = c.error("recall", {"cwd": str(repo), "queries": ["x"], "progress_token": token})
        assert err["code"] == 2 and "progress_token" in err["message"]
        err = c.error("consolidate", {"cwd": str(repo), "progress_token": token})
        assert err["code"] == 2
    c.send_raw('{"jsonrpc":"2.0","id":7,"method":"hello","params":' + deep(100_000) + "}")
    c.send_raw(deep(100_000))
    c.send_raw('{"jsonrpc":"2.0","id":8,"method":"recall","params":{"queries":["' + "y" * 20_000_000 + '"]}}')
    assert c.call("recall", {"cwd": str(repo), "queries": ["after"]})["details"]["total"] == 0
    assert c.call("hello")
    nulls = [json.loads(line) for line in c.raw if json.loads(line).get("id") is None]
    assert len(nulls) == 3 and all(m["error"]["code"] == -32700 for m in nulls)
    # nesting the parser does accept reaches the methods, which must cope with it
    nested = json.loads("[" * 800 + '"src/app.py"' + "]" * 800)
    assert c.call("path_notes", {"cwd": str(repo), "tool_name": "read", "input": {"path": nested}})["text"] is None
    assert c.call("recall", {"cwd": str(repo), "queries": ["x"], "extra": nested})["details"]["total"] == 0

    missing = repo.parent / "gone" / "deeper"
    err = c.error("remember", {"cwd": str(missing), "caption": "Fact", "content": "text"})
    assert err["code"] == 2 and "not an existing directory" in err["message"]
    assert not (repo.parent / "gone").exists()

    err = c.error("settings_set", {"key": "gate.coveredBy", "value": [1]})
    assert err["code"] == 2 and "gate.coveredBy" in err["message"]
    err = c.error("settings_set", {"key": "gate.neighbors", "value": 2.5})
    assert err["code"] == 2
    err = c.error("settings_set", {"key": "semif.url", "value": {"a": 1}})
    assert err["code"] == 2
    assert c.call("settings_set", {"key": "gate.coveredBy", "value": 0.7})
    assert c.call("settings_set", {"key": "gate.neighbors", "value": "200"})
    out = c.call("remember", {"cwd": str(repo), "caption": "Builds use make", "content": "run make all"})
    assert out["details"]["queued"] is True  # no judge set: queued, not crashed

    err = c.error("remember", {"cwd": str(repo), "caption": "NUL \x00 here", "content": "x"})
    assert err["code"] == 2 and "NUL" in err["message"]
    err = c.error("remember", {"cwd": str(repo), "caption": "lone \ud800", "content": "x"})
    assert err["code"] == 2 and "surrogate" in err["message"]
    err = c.error("recall", {"cwd": str(repo), "queries": [["nested"]]})
    assert err["code"] == 2
    assert c.close() == 0


@pytest.mark.parametrize("value", ["[1]", "abc", "nan"])
def test_a_bad_setting_in_config_json_is_a_clear_error(spawn: Any, repo: Path, home: Path, value: str) -> None:  # noqa: F811
    (home / "config.json").write_text(json.dumps({"gate.coveredBy": json.loads(value) if value == "[1]" else value}),
                                      encoding="utf-8")
    c = spawn(REALMEM_WORKER_AUTOSTART="0")
    err = c.error("remember", {"cwd": str(repo), "caption": "Builds use make", "content": "run make all"})
    assert err["code"] == 2 and "gate.coveredBy" in err["message"]
    items = {i["key"]: i for i in c.call("settings_get")["items"]}
    assert items["gate.coveredBy"]["source"] == "invalid"
    assert c.call("settings_set", {"key": "gate.coveredBy", "value": None})  # unset: fixed
    assert c.call("remember", {"cwd": str(repo), "caption": "Builds use make", "content": "run make all"})
    assert c.close() == 0


def test_a_lone_surrogate_is_found_at_any_depth_and_in_keys() -> None:
    """``validate`` encodes params in C and walks them itself only when they nest deeper than
    the encoder goes: both find a lone surrogate, wherever it hides."""
    from realmem.errors import ParamError
    from realmem.interface.rpc import validate

    def nest(value: Any, n: int) -> Any:
        for _ in range(n):
            value = [value]
        return value

    for depth in (0, 50, 5000):
        for bad in ("\ud800", {"\udfff key": 1}):
            with pytest.raises(ParamError, match="surrogate"):
                validate("path_notes", {"input": nest(bad, depth)})
        validate("path_notes", {"input": nest({"path": "src/\U0001f600.py"}, depth), "shown": ["a"] * 3000})
    with pytest.raises(ParamError, match="list of strings"):
        validate("path_notes", {"shown": ["a"] * 3000 + [1]})
