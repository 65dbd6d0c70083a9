"""`realmem eval recall`: the shipped recall evaluations (realmem/interface/evalsets/).

Two sets: ``dev`` (recall.yaml), written beside the rule, and ``public``: facts taken verbatim
from public projects' AGENTS.md / CONTRIBUTING files (each with its source and commit), with
questions written without looking at the matching code; its ``tune`` split chose the rule's
constants, its ``held-out`` split did not and is the one to quote.

Each mode builds a fresh store in a temporary REALMEM_HOME and git project, adds every fact
the way `realmem add` stores it, then replays the queries one after another through
`recall()` exactly as the agent calls it, hits counted, so use accumulates as it does in a
real session.  Modes: BM25 only (``bm25``), the bundled local embedder (``local``), and the
deterministic fake embedder served over HTTP (``embedder``: realmem/fakes/embeddings.py), so
the query path includes the real embeddings client.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
from ruamel.yaml import YAML

from realmem.read import embedder, recall
from realmem.write import memories, observe
from realmem.app import Realmem
from realmem.fakes.embeddings import FakeEmbeddings
from realmem.words import count
from realmem.read.render import table

MODES = ("bm25", "local", "embedder")
SETS = {"dev": "recall.yaml", "public": "public.yaml"}
SPLITS = ("all", "tune", "held-out")
DIMS = 256  # the fake embedder's space in the evaluation


@attrs.define
class Query:
    text: str
    expect: list[str]
    kind: str = ""
    split: str = "tune"


@attrs.define
class EvalSet:
    facts: list[dict[str, Any]]
    queries: list[Query]


@attrs.define
class Outcome:
    query: Query
    returned: list[str]  # fact ids of the first page, in order
    weak: bool = False  # the page holds weak matches only (nothing matched)

    @property
    def rank(self) -> int | None:
        """1-based rank of the first expected fact on the page, None when absent."""
        return next((i for i, f in enumerate(self.returned, 1) if f in self.query.expect), None)


@attrs.define
class Report:
    mode: str
    outcomes: list[Outcome]

    @property
    def on_topic(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.query.expect]

    @property
    def off_topic(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.query.expect]

    def recall_at(self, k: int, *, strong: bool = False) -> float:
        """Share of on-topic queries with an expected fact in the first ``k`` as the agent
        sees them (weak matches included), or among strong matches only."""
        on = self.on_topic
        return sum(1 for o in on if o.rank is not None and o.rank <= k and not (strong and o.weak)) / max(1, len(on))

    @property
    def on_topic_silent(self) -> float:
        """Share of on-topic queries answered with nothing at all."""
        on = self.on_topic
        return sum(1 for o in on if not o.returned) / max(1, len(on))

    @property
    def off_topic_strong(self) -> float:
        """Share of off-topic queries answered with a strong match."""
        off = self.off_topic
        return sum(1 for o in off if o.returned and not o.weak) / max(1, len(off))

    @property
    def mrr(self) -> float:
        on = self.on_topic
        return sum(1.0 / o.rank for o in on if o.rank) / max(1, len(on))

    @property
    def off_topic_precision(self) -> float:
        """Share of off-topic queries answered with nothing."""
        off = self.off_topic
        return sum(1 for o in off if not o.returned) / max(1, len(off))

    def summary(self) -> dict[str, Any]:
        return {"mode": self.mode, "queries": len(self.on_topic), "off_topic_queries": len(self.off_topic),
                "recall_at_1": round(self.recall_at(1), 4), "recall_at_3": round(self.recall_at(3), 4),
                "strong_recall_at_3": round(self.recall_at(3, strong=True), 4),
                "mrr": round(self.mrr, 4), "off_topic_precision": round(self.off_topic_precision, 4),
                "off_topic_strong": round(self.off_topic_strong, 4),
                "on_topic_silent": round(self.on_topic_silent, 4),
                "misses": [{"query": o.query.text, "expect": o.query.expect, "returned": o.returned[:3]}
                           for o in self.outcomes if (o.rank is None or o.rank > 3) if o.query.expect
                           or o.returned]}


def load_set(path: Path | None = None, *, name: str = "dev", split: str = "all") -> EvalSet:
    """An evaluation set; ``split`` keeps the queries of one split (and every fact: the
    other split's facts stay in the store as distractors)."""
    text = path.read_text("utf-8") if path else \
        resources.files("realmem.interface").joinpath(f"evalsets/{SETS[name]}").read_text("utf-8")
    data = YAML(typ="safe").load(text)
    facts = list(data["facts"])
    known = {f["id"] for f in facts}
    queries = [Query(str(q["q"]), list(q.get("expect") or []), str(q.get("kind") or ""),
                     str(q.get("split") or "tune")) for q in data["queries"]]
    if split != "all":
        queries = [q for q in queries if q.split == split]
    for q in queries:
        unknown = set(q.expect) - known
        if unknown:
            raise ValueError(f"query {q.text!r} expects unknown facts {sorted(unknown)}")
    return EvalSet(facts, queries)


def _touch(root: Path, rel: str) -> None:
    """Create a fact's path in the project so it names something real."""
    target = root / rel
    if "." in Path(rel).name.lstrip("."):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    else:
        target.mkdir(parents=True, exist_ok=True)


@contextmanager
def _project() -> Iterator[tuple[Path, Path]]:
    with tempfile.TemporaryDirectory(prefix="realmem-eval-") as tmp:
        home, root = Path(tmp) / "home", Path(tmp) / "proj"
        root.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=root, check=True, capture_output=True)
        # Global paths resolve under the temp dir, never the real ~; the user's own embedding
        # settings in the environment would override the mode's.
        saved = {k: v for k, v in os.environ.items() if k == "HOME" or k.startswith("REALMEM_EMBEDDING_")}
        for k in saved:
            del os.environ[k]
        os.environ["HOME"] = tmp
        try:
            yield home, root
        finally:
            os.environ.pop("HOME", None)
            os.environ.update(saved)


def _no_vector(_app: Realmem, _text: str) -> None:
    return None


def run_mode(mode: str, evalset: EvalSet, *, progress: Callable[[str], None] = lambda m: None) -> Report:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    with _project() as (home, root), FakeEmbeddings(dims=DIMS) as fake:
        app = observe.open_attached(home, root, scan=False)
        try:
            by_id: dict[str, str] = {}
            for fact in evalset.facts:
                for rel in fact.get("paths") or []:
                    _touch(root, rel)
                store, stored = memories.place(app, "shared", fact.get("paths"))
                m = memories.add(app, fact["caption"], fact["content"], store=store, stored_paths=stored, source="add")
                by_id[m.id] = fact["id"]
            app.config.set("embedding.local", "multilingual-e5-small" if mode == "local" else "off")
            if mode == "embedder":
                app.config.set("embedding.url", fake.url)
                app.config.set("embedding.model", fake.models[0])
            if mode != "bm25":
                progress(f"[{mode}] embedding {count(len(evalset.facts), 'fact')}…")
                embedder.embed_missing(app)
            progress(f"[{mode}] {count(len(evalset.facts), 'fact')} stored; replaying {count(len(evalset.queries), 'query')}…")
            outcomes = []
            for q in evalset.queries:
                res = recall.recall(app, queries=[q.text], **({} if mode != "bm25" else {"embed": _no_vector}))
                outcomes.append(Outcome(q, [by_id[i.memory.id] for i in res.items], res.weak))
            return Report(mode, outcomes)
        finally:
            app.close()


def run(modes: tuple[str, ...] = MODES, *, path: Path | None = None, name: str = "dev", split: str = "all",
        progress: Callable[[str], None] = lambda m: None) -> list[Report]:
    evalset = load_set(path, name=name, split=split)
    return [run_mode(m, evalset, progress=progress) for m in modes]


def render(reports: list[Report]) -> str:
    rows = [[r.mode, len(r.on_topic), f"{r.recall_at(1):.3f}", f"{r.recall_at(3):.3f}",
             f"{r.recall_at(3, strong=True):.3f}", f"{r.mrr:.3f}", f"{r.on_topic_silent:.3f}",
             f"{r.off_topic_precision:.3f} ({sum(1 for o in r.off_topic if not o.returned)}/{len(r.off_topic)})",
             f"{r.off_topic_strong:.3f}"]
            for r in reports]
    out = [table(["mode", "queries", "recall@1", "recall@3", "strong @3", "MRR", "on-topic silent",
                  "off-topic silent", "off-topic strong"], rows)]
    for r in reports:
        misses = [o for o in r.outcomes if (o.query.expect and (o.rank is None or o.rank > 3))
                  or (not o.query.expect and o.returned)]
        if misses:
            out += ["", f"{r.mode}: {len(misses)} miss{'es' if len(misses) != 1 else ''}"]
            out += [f"  {o.query.text!r}: expected {', '.join(o.query.expect) or 'nothing'}; "
                    f"got {', '.join(o.returned[:3]) or 'nothing'}" for o in misses]
    return "\n".join(out)
