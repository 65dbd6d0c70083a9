"""Tests for realmem.stores.paths: frames, conversion, matching, overlap, index and bash words."""

from __future__ import annotations

import fnmatch
import glob
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from realmem.stores.paths import (
    PathError,
    PathIndex,
    check_input,
    convert_paths,
    exists,
    in_project,
    matches,
    normalize_input,
    overlap,
    reexpress,
    specificity,
    to_absolute,
    to_store_frame,
    touched_paths_from_bash,
)

HOME = Path("/home/u")
ROOT = Path("/home/u/proj")
CWD = Path("/home/u/proj/packages/web")


# --- normalize_input -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("src/a.ts", "/home/u/proj/packages/web/src/a.ts"),
        ("./src/", "/home/u/proj/packages/web/src"),
        (".", "/home/u/proj/packages/web"),
        ("../api//x.ts", "/home/u/proj/packages/api/x.ts"),
        ("../../..", "/home/u"),
        ("~", "/home/u"),
        ("~/notes/../todo.md", "/home/u/todo.md"),
        ("/etc/hosts", "/etc/hosts"),
        ("/../../etc", "/etc"),
        ("//srv///data/", "/srv/data"),
        ("  db  ", "/home/u/proj/packages/web/db"),
        ("**/migrations/*.sql", "/home/u/proj/packages/web/**/migrations/*.sql"),
        ("../*/package.json", "/home/u/proj/packages/*/package.json"),
        ("src/[id]/page?.tsx", "/home/u/proj/packages/web/src/[id]/page?.tsx"),
    ],
)
def test_normalize_input(raw: str, expected: str) -> None:
    assert normalize_input(raw, cwd=CWD, home=HOME) == expected


@pytest.mark.parametrize("raw", ["", "   ", "a\x00b", "~bob/x", "src/*/../x", "**/.."])
def test_normalize_input_rejects(raw: str) -> None:
    with pytest.raises(PathError):
        normalize_input(raw, cwd=CWD, home=HOME)


def test_normalize_input_requires_absolute_bases() -> None:
    with pytest.raises(PathError):
        normalize_input("x", cwd=Path("rel"), home=HOME)
    with pytest.raises(PathError):
        normalize_input("~/x", cwd=CWD, home=Path("rel"))


def test_path_error_is_value_error() -> None:
    assert issubclass(PathError, ValueError)


# --- frames ----------------------------------------------------------------------------


def test_in_project() -> None:
    assert in_project("/home/u/proj", ROOT)
    assert in_project("/home/u/proj/**/x.sql", ROOT)
    assert not in_project("/home/u/project2/x", ROOT)
    assert not in_project("/home/u", ROOT)
    assert not in_project("/**/x", ROOT)
    assert in_project("/anything", Path("/"))


@pytest.mark.parametrize(
    ("absolute", "kind", "stored"),
    [
        ("/home/u/proj", "project", "."),
        ("/home/u/proj/db", "project", "db"),
        ("/home/u/proj/**/migrations/*.sql", "project", "**/migrations/*.sql"),
        ("/home/u", "global", "~"),
        ("/home/u/.config/git", "global", "~/.config/git"),
        ("/home/u/proj/packages/*", "global", "~/proj/packages/*"),
        ("/etc/hosts", "global", "/etc/hosts"),
        ("/home/user2/x", "global", "/home/user2/x"),
        ("/", "global", "/"),
    ],
)
def test_frame_conversion_both_ways(absolute: str, kind: str, stored: str) -> None:
    assert to_store_frame(absolute, kind=kind, root=ROOT, home=HOME) == stored
    assert to_absolute(stored, kind=kind, root=ROOT, home=HOME) == absolute


def test_to_store_frame_errors() -> None:
    with pytest.raises(PathError):
        to_store_frame("/home/u/other", kind="project", root=ROOT, home=HOME)
    with pytest.raises(PathError):
        to_store_frame("/home/u/proj2", kind="project", root=ROOT, home=HOME)
    with pytest.raises(PathError):
        to_store_frame("/home/u/proj/x", kind="project", root=None, home=HOME)
    with pytest.raises(PathError):
        to_store_frame("relative/x", kind="global", root=None, home=HOME)
    with pytest.raises(PathError):
        to_store_frame("/x", kind="shared", root=ROOT, home=HOME)


def test_home_at_filesystem_root() -> None:
    home = Path("/")
    assert to_store_frame("/srv/x", kind="global", root=None, home=home) == "~/srv/x"
    assert to_absolute("~/srv/x", kind="global", root=None, home=home) == "/srv/x"
    assert to_absolute("~", kind="global", root=None, home=home) == "/"


def test_to_absolute_tolerates_hand_edits() -> None:
    assert to_absolute("./src/", kind="project", root=ROOT, home=HOME) == "/home/u/proj/src"
    assert to_absolute("a//b/../c", kind="project", root=ROOT, home=HOME) == "/home/u/proj/a/c"
    assert to_absolute("~/x/", kind="global", root=None, home=HOME) == "/home/u/x"


@pytest.mark.parametrize(
    ("stored", "kind"),
    [
        ("../other", "project"),
        ("src/../..", "project"),
        ("/home/u/proj/src", "project"),
        ("~/proj/src", "project"),
        ("", "project"),
        ("src", "global"),
        ("~bob/x", "global"),
        ("a\x00", "global"),
    ],
)
def test_to_absolute_rejects(stored: str, kind: str) -> None:
    with pytest.raises(PathError):
        to_absolute(stored, kind=kind, root=ROOT, home=HOME)


def test_to_absolute_project_needs_root() -> None:
    with pytest.raises(PathError):
        to_absolute("src", kind="project", root=None, home=HOME)


# --- convert_paths ---------------------------------------------------------------------


def test_convert_paths_inside_project() -> None:
    kind, stored = convert_paths(
        ["src", "../api/", "/home/u/proj/db", "~/proj/README.md", "../../**/x.sql", "./src"],
        cwd=CWD,
        root=ROOT,
        home=HOME,
    )
    assert kind == "project"
    assert stored == ["packages/web/src", "packages/api", "db", "README.md", "**/x.sql"]


def test_convert_paths_project_root_is_dot() -> None:
    assert convert_paths(["../.."], cwd=CWD, root=ROOT, home=HOME) == ("project", ["."])


def test_convert_paths_outside_project_makes_global() -> None:
    kind, stored = convert_paths(["src", "~/.npmrc", "/etc/hosts"], cwd=CWD, root=ROOT, home=HOME)
    assert kind == "global"
    assert stored == ["~/proj/packages/web/src", "~/.npmrc", "/etc/hosts"]


def test_convert_paths_parent_of_root_is_outside() -> None:
    assert convert_paths(["../../.."], cwd=CWD, root=ROOT, home=HOME) == ("global", ["~"])


def test_convert_paths_without_root_is_global() -> None:
    assert convert_paths(["src"], cwd=CWD, root=None, home=HOME) == (
        "global",
        ["~/proj/packages/web/src"],
    )


def test_convert_paths_defaults() -> None:
    assert convert_paths([], cwd=CWD, root=ROOT, home=HOME) == ("project", ["."])
    assert convert_paths([], cwd=CWD, root=None, home=HOME) == ("global", ["~"])


def test_convert_paths_rejects_bad_input() -> None:
    with pytest.raises(PathError):
        convert_paths(["src", ""], cwd=CWD, root=ROOT, home=HOME)


# --- reexpress -------------------------------------------------------------------------


def test_reexpress_project_to_global() -> None:
    assert reexpress(
        [".", "db", "**/migrations/*.sql"], from_kind="project", to_kind="global", root=ROOT, home=HOME
    ) == ["~/proj", "~/proj/db", "~/proj/**/migrations/*.sql"]


def test_reexpress_global_to_project() -> None:
    assert reexpress(
        ["~", "~/proj/db", "/home/u/proj/src"], from_kind="global", to_kind="project", root=ROOT, home=HOME
    ) == [".", "db", "src"]


def test_reexpress_dedupes() -> None:
    assert reexpress(["~", "~/proj"], from_kind="global", to_kind="project", root=ROOT, home=HOME) == ["."]


@pytest.mark.parametrize("stored", ["~/.npmrc", "/etc/hosts", "~/**/x.sql", "~/proj2/x"])
def test_reexpress_outside_project_fails(stored: str) -> None:
    with pytest.raises(PathError):
        reexpress([stored], from_kind="global", to_kind="project", root=ROOT, home=HOME)


def test_reexpress_same_kind_and_defaults() -> None:
    assert reexpress(["./db/"], from_kind="project", to_kind="project", root=ROOT, home=HOME) == ["db"]
    assert reexpress([], from_kind="project", to_kind="global", root=ROOT, home=HOME) == ["~"]
    assert reexpress([], from_kind="global", to_kind="project", root=ROOT, home=HOME) == ["."]
    with pytest.raises(PathError):
        reexpress(["db"], from_kind="project", to_kind="nowhere", root=ROOT, home=HOME)


# --- matching --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "touched", "expected"),
    [
        ("/r/package.json", "/r/package.json", True),
        ("/r/package.json", "/r/package.json5", False),
        ("/r/src/db", "/r/src/db", True),
        ("/r/src/db", "/r/src/db/schema.ts", True),
        ("/r/src/db", "/r/src", False),
        ("/r/src/db", "/r", False),
        ("/r/src/db", "/r/src/db2", False),
        ("/r/src/db", "/r/src/db2/x.ts", False),
        ("/r", "/r/anything/deep", True),
        ("/", "/etc", True),
        ("/r/**/migrations/*.sql", "/r/db/migrations/001.sql", True),
        ("/r/**/migrations/*.sql", "/r/migrations/001.sql", True),
        ("/r/**/migrations/*.sql", "/r/a/b/c/migrations/x.sql", True),
        ("/r/**/migrations/*.sql", "/r/db/migrations/001.py", False),
        ("/r/**/migrations/*.sql", "/r/db/migrations", False),
        ("/r/**/migrations/*.sql", "/r/db/migrations/sub/x.sql", False),
        ("/r/packages/*", "/r/packages/web/src/x.ts", True),
        ("/r/packages/*", "/r/packages", False),
        ("/r/packages/*/package.json", "/r/packages/web/package.json", True),
        ("/r/packages/*/package.json", "/r/packages/web/src/package.json", False),
        ("/r/src/?.ts", "/r/src/a.ts", True),
        ("/r/src/?.ts", "/r/src/ab.ts", False),
        ("/r/src/[ab].ts", "/r/src/b.ts", True),
        ("/r/src/[!ab].ts", "/r/src/b.ts", False),
        ("/r/src/[!ab].ts", "/r/src/c.ts", True),
        ("/r/*.ts", "/r/.hidden.ts", True),
        ("/r/*", "/r", False),
        ("/r/**", "/r", True),
        ("/r/**", "/r/x/y", True),
        ("/r/**", "/q", False),
        ("/r/*/db", "/r/a/b/db", False),
        ("/r/app/[id]/page.tsx", "/r/app/[id]/page.tsx", True),
        ("/r/app/[id]/page.tsx", "/r/app/i/page.tsx", True),
        ("/r/app/[id]/page.tsx", "/r/app/x/page.tsx", False),
        ("/r/a.b", "/r/aXb", False),
        ("/r/x+(y)", "/r/x+(y)/z", True),
    ],
)
def test_matches(pattern: str, touched: str, expected: bool) -> None:
    assert matches(pattern, touched) is expected


def test_matches_requires_absolute() -> None:
    with pytest.raises(PathError):
        matches("src", "/r/src")


def test_specificity_orders_most_specific_first() -> None:
    ordered = [
        "/r/src/db/schema.ts",
        "/r/src/db",
        "/r/src/*.ts",
        "/r/src",
        "/r",
        "/",
    ]
    scores = [specificity(p) for p in ordered]
    assert scores == sorted(scores, reverse=True)
    assert len(set(scores)) == len(scores)
    assert specificity("/r/src/*") < specificity("/r/src/db")
    assert specificity("/r") < specificity("/r/**/x") < specificity("/r/*/x")


# --- overlap ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (["/r/packages/a"], ["/r/packages/b"], False),
        (["/r/packages/a"], ["/r/packages/a"], True),
        (["/r"], ["/r/packages/b"], True),
        (["/r/packages/b/src"], ["/r"], True),
        (["/r/packages/a"], ["/r/packages/ab"], False),
        (["/r/packages/*"], ["/r/packages/b/src"], True),
        (["/r/packages/*/jest.config.js"], ["/r/packages/b"], True),
        (["/r/packages/a/*.ts"], ["/r/packages/b"], False),
        (["/r/**/migrations/*.sql"], ["/r/packages/a"], True),
        (["/r/*.sql"], ["/r/*.ts"], False),
        (["/r/**/*.sql"], ["/r/**/*.ts"], True),
        (["/r/a*b"], ["/r/ac"], False),
        (["/r/src/*.ts"], ["/r/src/a*"], True),
        (["/r/x/**/y"], ["/r/z/**"], False),
        (["/r/a", "/r/b"], ["/r/c", "/r/b/x"], True),
        ([], ["/r"], False),
    ],
)
def test_overlap(a: list[str], b: list[str], expected: bool) -> None:
    assert overlap(a, b) is expected
    assert overlap(b, a) is expected


# --- exists ----------------------------------------------------------------------------


def test_exists(tmp_path: Path) -> None:
    (tmp_path / "db" / "migrations").mkdir(parents=True)
    (tmp_path / "db" / "migrations" / "001.sql").write_text("")
    (tmp_path / "app" / "[id]").mkdir(parents=True)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    base = tmp_path.as_posix()
    assert exists(f"{base}/db")
    assert exists(f"{base}/db/migrations/001.sql")
    assert exists(f"{base}/dangling")
    assert not exists(f"{base}/nope")
    assert exists(f"{base}/**/migrations/*.sql")
    assert exists(f"{base}/*/migrations")
    assert not exists(f"{base}/**/*.py")
    assert not exists(f"{base}/nope/**")
    assert exists(f"{base}/app/[id]")
    assert not exists(f"{base}/db/*/x")


def test_exists_does_not_loop_through_symlinked_directories(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "loop").symlink_to(tmp_path / "a")
    assert not exists(f"{tmp_path.as_posix()}/**/missing.txt")


# --- PathIndex -------------------------------------------------------------------------


def test_path_index_basics() -> None:
    index = PathIndex(
        [
            ("root", "/r"),
            ("db", "/r/src/db"),
            ("db", "/r/infra/db"),
            ("sql", "/r/**/migrations/*.sql"),
            ("pkgs", "/r/packages/*"),
            ("other", "/q"),
            ("sql2", "/r/**/migrations/*.sql"),
        ]
    )
    assert len(index) == 6
    assert set(index.match("/r/src/db/x.ts")) == {"root", "db"}
    assert index.match("/r/src/db/x.ts")[0] == "db"
    assert set(index.match("/r/infra/db/migrations/1.sql")) == {"root", "db", "sql", "sql2"}
    assert set(index.match("/r/packages/web/a.ts")) == {"root", "pkgs"}
    assert index.match("/r/src") == ["root"]
    assert index.match("/elsewhere") == []
    index.remove("db")
    index.remove("never-added")
    assert index.match("/r/src/db/x.ts") == ["root"]
    index.add("sql", "/r/src")
    assert set(index.match("/r/src/db/x.ts")) == {"root", "sql"}
    index.remove("sql")
    assert set(index.match("/r/infra/db/migrations/1.sql")) == {"root", "sql2"}
    index.remove("sql2")
    assert set(index.match("/r/infra/db/migrations/1.sql")) == {"root"}
    assert len(index) == 3


def test_path_index_rejects_relative() -> None:
    with pytest.raises(PathError):
        PathIndex([("k", "src")])
    with pytest.raises(PathError):
        PathIndex().match("src")


# --- property tests --------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "c", "x.sql", "y.ts", ".env"])
PATTERN_SEGMENTS = st.sampled_from(["a", "b", "c", "x.sql", "*", "**", "*.sql", "?", "[ab]", "[!a]", "*.ts"])
SAFE_NAME = st.text(
    alphabet=st.sampled_from("abcxyz09_-.+ ()[]*?"), min_size=1, max_size=6
).filter(lambda s: s not in (".", "..") and not s.startswith("~") and s.strip() == s)


def _abs(segments: list[str]) -> str:
    return "/" + "/".join(segments)


touched_st = st.lists(NAMES, min_size=0, max_size=5).map(_abs)
pattern_st = st.lists(PATTERN_SEGMENTS, min_size=0, max_size=4).map(_abs)


def _oracle(pattern: str, touched: str) -> bool:
    """Independent reference: segment-wise fnmatch with ** backtracking, plus subtree."""
    pat = [s for s in pattern.split("/") if s]
    path = [s for s in touched.split("/") if s]
    if touched == pattern or touched.startswith(pattern.rstrip("/") + "/"):
        return True

    def walk(i: int, j: int) -> bool:
        if i == len(pat):
            return True
        if pat[i] == "**":
            return any(walk(i + 1, k) for k in range(j, len(path) + 1))
        return j < len(path) and fnmatch.fnmatchcase(path[j], pat[i]) and walk(i + 1, j + 1)

    return walk(0, 0)


@settings(deadline=None)
@given(pattern_st, touched_st)
def test_matches_agrees_with_reference(pattern: str, touched: str) -> None:
    assert matches(pattern, touched) is _oracle(pattern, touched)


@settings(deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["k1", "k2", "k3", "k4", "k5"]), pattern_st), max_size=12),
    st.lists(st.sampled_from(["k1", "k2", "k3", "k4", "k5"]), max_size=3),
    st.lists(touched_st, min_size=1, max_size=8),
)
def test_path_index_equals_brute_force(
    entries: list[tuple[str, str]], removed: list[str], touched_paths: list[str]
) -> None:
    index = PathIndex(entries)
    for key in removed:
        index.remove(key)
    live = [(k, p) for k, p in entries if k not in removed]
    for touched in touched_paths:
        found = index.match(touched)
        assert len(found) == len(set(found))
        assert set(found) == {k for k, p in live if matches(p, touched)}
        assert set(index.match_patterns(touched)) == {(k, p) for k, p in live if matches(p, touched)}


@settings(deadline=None)
@given(pattern_st, pattern_st, st.lists(touched_st, min_size=1, max_size=20))
def test_overlap_is_sound(a: str, b: str, touched_paths: list[str]) -> None:
    if any(matches(a, t) and matches(b, t) for t in touched_paths):
        assert overlap([a], [b])
        assert overlap([b], [a])


@settings(deadline=None)
@given(st.lists(SAFE_NAME, max_size=5))
def test_project_frame_round_trip(segments: list[str]) -> None:
    absolute = normalize_input("/".join(segments) or ".", cwd=ROOT, home=HOME)
    stored = to_store_frame(absolute, kind="project", root=ROOT, home=HOME)
    assert not stored.startswith(("/", "./", "~")) and not stored.endswith("/")
    assert ".." not in stored.split("/")
    assert to_absolute(stored, kind="project", root=ROOT, home=HOME) == absolute


@settings(deadline=None)
@given(st.sampled_from(["/home/u", "/", "/srv", "/home/u/proj"]), st.lists(SAFE_NAME, max_size=5))
def test_global_frame_round_trip(prefix: str, segments: list[str]) -> None:
    absolute = normalize_input("/".join([prefix, *segments]), cwd=ROOT, home=HOME)
    stored = to_store_frame(absolute, kind="global", root=None, home=HOME)
    assert stored == "~" or stored.startswith(("~/", "/"))
    assert to_absolute(stored, kind="global", root=None, home=HOME) == absolute


@settings(deadline=None)
@given(st.lists(st.lists(SAFE_NAME, max_size=4).map(lambda s: "/".join(s) or "."), min_size=1, max_size=4))
def test_reexpress_project_global_project_is_identity(raw: list[str]) -> None:
    stored = _dedupe_stored(raw)
    there = reexpress(stored, from_kind="project", to_kind="global", root=ROOT, home=HOME)
    assert reexpress(there, from_kind="global", to_kind="project", root=ROOT, home=HOME) == stored


@settings(deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["/home/u/proj", "/home/u", "/etc"]), st.lists(SAFE_NAME, max_size=3)),
        min_size=1,
        max_size=4,
    )
)
def test_reexpress_global_project_global_when_expressible(raw: list[tuple[str, list[str]]]) -> None:
    absolute = [normalize_input("/".join([p, *s]), cwd=ROOT, home=HOME) for p, s in raw]
    stored = list(dict.fromkeys(to_store_frame(a, kind="global", root=None, home=HOME) for a in absolute))
    assume("~" not in stored)  # "~" narrows to "." by design, so it cannot come back as "~"
    if all(in_project(a, ROOT) for a in absolute):
        there = reexpress(stored, from_kind="global", to_kind="project", root=ROOT, home=HOME)
        assert reexpress(there, from_kind="project", to_kind="global", root=ROOT, home=HOME) == stored
    else:
        with pytest.raises(PathError):
            reexpress(stored, from_kind="global", to_kind="project", root=ROOT, home=HOME)


def _dedupe_stored(raw: list[str]) -> list[str]:
    return list(
        dict.fromkeys(
            to_store_frame(normalize_input(r, cwd=ROOT, home=HOME), kind="project", root=ROOT, home=HOME)
            for r in raw
        )
    )


TREE_FILES = st.lists(st.lists(st.sampled_from(["a", "b", "x.sql", "m"]), min_size=1, max_size=4), max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREE_FILES, st.lists(PATTERN_SEGMENTS, min_size=1, max_size=4))
def test_exists_agrees_with_glob(files: list[list[str]], pattern_segments: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp).resolve()
        for parts in files:
            target = base.joinpath(*parts)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                continue
            if not target.exists():
                target.write_text("")
        pattern = base.as_posix() + "/" + "/".join(pattern_segments)
        # glob.glob yields "missing/" for "missing/**" on Python 3.11, hence the lexists filter.
        found = glob.glob(pattern, recursive=True, include_hidden=True)
        expected = any(os.path.lexists(f) for f in found)
        assert exists(pattern) is expected


# --- bash words ------------------------------------------------------------------------


@pytest.fixture()
def workspace(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    project = home / "proj"
    (project / "src").mkdir(parents=True)
    (project / "src" / "a.py").write_text("")
    (project / "docs").mkdir()
    (project / "out.txt").write_text("")
    (project / "my file.md").write_text("")
    (home / "notes.md").write_text("")
    return home, project


def test_bash_words_existing_paths(workspace: tuple[Path, Path]) -> None:
    home, project = workspace
    p = project.as_posix()
    found = touched_paths_from_bash(
        "cat src/a.py&&ls docs | grep x >out.txt; wc -l 'my file.md' missing.txt src/a.py",
        cwd=project,
        home=home,
    )
    assert found == [f"{p}/src/a.py", f"{p}/docs", f"{p}/out.txt", f"{p}/my file.md"]


def test_bash_words_options_assignments_home_absolute(workspace: tuple[Path, Path]) -> None:
    home, project = workspace
    p = project.as_posix()
    command = f"PYTHONPATH=src pytest -q --cov=src/a.py --rootdir docs -x ~/notes.md {home.as_posix()}/notes.md ."
    found = touched_paths_from_bash(command, cwd=project, home=home)
    assert found == [f"{p}/src", f"{p}/src/a.py", f"{p}/docs", f"{home.as_posix()}/notes.md", p]


def test_bash_words_relative_to_cwd(workspace: tuple[Path, Path]) -> None:
    home, project = workspace
    found = touched_paths_from_bash("cat a.py ../docs", cwd=project / "src", home=home)
    assert found == [f"{project.as_posix()}/src/a.py", f"{project.as_posix()}/docs"]


@pytest.mark.parametrize("command", ['echo "unclosed src/a.py', "echo 'unclosed src/a.py", "cat src/a.py \\"])
def test_bash_words_tolerate_unbalanced_quotes(workspace: tuple[Path, Path], command: str) -> None:
    home, project = workspace
    found = touched_paths_from_bash(command, cwd=project, home=home)
    if command.startswith("cat"):
        assert found == [f"{project.as_posix()}/src/a.py"]
    else:
        assert found == []


def test_bash_words_quoted_path_with_separator(workspace: tuple[Path, Path]) -> None:
    home, project = workspace
    assert touched_paths_from_bash('grep x "src/a.py"', cwd=project, home=home) == [
        f"{project.as_posix()}/src/a.py"
    ]


def test_bash_words_are_bounded(workspace: tuple[Path, Path]) -> None:
    home, project = workspace
    command = "echo " + " ".join(f"nope{i}" for i in range(100)) + " src/a.py"
    assert touched_paths_from_bash(command, cwd=project, home=home) == []
    assert touched_paths_from_bash("echo nope src/a.py", cwd=project, home=home) == [
        f"{project.as_posix()}/src/a.py"
    ]


def test_bash_words_skip_unusable_words(workspace: tuple[Path, Path]) -> None:
    home, project = workspace
    assert touched_paths_from_bash("ls ~bob --verbose -- '' src/nope", cwd=project, home=home) == []


# --- check_input: the add and manage screens' one path check -------------------------------------

def test_check_input_names_what_a_typed_path_is(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("x\n")
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)

    def kind(raw: str) -> tuple[str | None, str | None]:
        out = check_input(raw, cwd=tmp_path, home=home)
        return out["kind"], out["warning"]

    assert kind("src") == ("dir", None)
    assert kind(" src/app.py ") == ("file", None)
    assert kind("src/*.py") == ("glob", None)
    assert kind("~/notes") == ("dir", None)
    assert kind(str(tmp_path / "src" / "app.py")) == ("file", None)
    assert kind("docs/later.md") == ("missing", "docs/later.md: does not exist (yet)")
    assert kind("src/**/*.rs") == ("missing", "src/**/*.rs: no file matches this glob (yet)")
    assert kind("~bob/x") == ("invalid", "only ~ and ~/ are supported, not another user's home: '~bob/x'")
    assert check_input("docs/later.md", cwd=tmp_path, home=home)["absolute"] == f"{tmp_path}/docs/later.md"


def test_check_paths_over_rpc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import json

    from realmem.interface.rpc import Server
    monkeypatch.setenv("REALMEM_WORKER_AUTOSTART", "0")
    (tmp_path / "src").mkdir()
    out = io.StringIO()
    server = Server(str(tmp_path / "home"), out)
    server.handle({"jsonrpc": "2.0", "id": 1, "method": "check_paths",
                   "params": {"cwd": str(tmp_path), "paths": ["src", "gone.txt", "~x/y"]}})
    res = json.loads(out.getvalue())["result"]
    assert [i["kind"] for i in res["items"]] == ["dir", "missing", "invalid"]
    assert res["warnings"] == ["gone.txt: does not exist (yet)"]
    assert res["invalid"] == ["only ~ and ~/ are supported, not another user's home: '~x/y'"]
    for apps in server.all_apps:
        for a in apps.values():
            a.close()


def test_bash_glob_words_expand_against_the_disk(workspace: tuple[Path, Path]) -> None:
    home, project = workspace
    p = project.as_posix()
    (project / "src" / "db").mkdir()
    for name in ("001.sql", "002.sql", "notes.txt"):
        (project / "src" / "db" / name).write_text("")
    found = touched_paths_from_bash("ls src/db/*.sql src/nothing/*.sql", cwd=project, home=home)
    assert found == [f"{p}/src/db/001.sql", f"{p}/src/db/002.sql"]


def test_bash_words_after_cd_are_relative_to_its_directory(workspace: tuple[Path, Path]) -> None:
    home, project = workspace
    p = project.as_posix()
    (project / "src" / "db").mkdir()
    (project / "src" / "db" / "schema.sql").write_text("")
    found = touched_paths_from_bash("cd src/db && cat schema.sql", cwd=project, home=home)
    assert found == [f"{p}/src/db", f"{p}/src/db/schema.sql"]
    # `cd` alone goes home: the words after it are not read against the project.
    assert touched_paths_from_bash("cd; cat schema.sql", cwd=project / "src" / "db", home=home) == []
    # A cd into something that is not a directory moves nothing.
    found = touched_paths_from_bash("cd src/a.py; cat a.py", cwd=project / "src", home=home)
    assert found == [f"{p}/src/a.py"]
