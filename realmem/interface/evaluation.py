"""`realmem eval recall`: the shipped recall evaluations (realmem/interface/evalsets/).

Two sets: ``dev`` (recall.yaml), written beside the rule, and ``public``: facts taken verbatim
from public projects' AGENTS.md / CONTRIBUTING files (each with its source and commit), with
questions written without looking at the matching code; its ``tune`` split chose the rule's
constants, its ``held-out`` split did not and is the one to quote.  A split's store holds
only its own projects' facts unless every fact is asked for (``store="all"``).

Each mode builds a fresh store in a temporary REALMEM_HOME and git project, adds every fact
the way `realmem add` stores it, then replays the queries one after another through
`recall()` exactly as the agent calls it, hits counted, so use accumulates as it does in a
real session.  Modes: BM25 only (``bm25``), the bundled local embedder (``local``: e5 and USE
fused; ``e5``: multilingual-e5-small alone), and the
deterministic fake embedder served over HTTP (``embedder``: realmem/fakes/embeddings.py), so
the query path includes the real embeddings client.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
from ruamel.yaml import YAML

from realmem.read import embedder, recall, relevance
from realmem.stores import ids
from realmem.write import memories
from realmem.write.attached import open_attached
from realmem.app import Realmem
from realmem.fakes.chat import FakeChat
from realmem.fakes.embeddings import FakeEmbeddings
from realmem.fakes.systemone import FakeSystemOne
from realmem.words import count
from realmem.interface.render import table

MODES = ("bm25", "e5", "local", "embedder", "judge", "judge-noisy", "judge-chat")
LOCAL = {"e5": "multilingual-e5-small", "local": "e5+use", "judge": "e5+use", "judge-noisy": "e5+use",
         "judge-chat": "e5+use"}
NOISE = {"judge": 0.0, "judge-noisy": 0.1, "judge-chat": 0.0}  # the System One fake's share of wrong relevance answers
CHAT = {"judge-chat"}  # the chat judge asked (recall.relevance chat), the chat fake answering from System One's
SETS = {"dev": "recall.yaml", "public": "public.yaml"}
SPLITS = ("all", "tune", "held-out")
STORES = ("split", "all")  # what a split's store holds: its own projects' facts, or every fact
DIMS = 256  # the fake embedder's space in the evaluation


@attrs.define
class Query:
    text: str
    expect: list[str]
    kind: str = ""
    split: str = "tune"
    repo: str = ""  # the project it is asked in; empty for questions of no project


@attrs.define
class EvalSet:
    facts: list[dict[str, Any]]
    queries: list[Query]


@attrs.define
class Outcome:
    query: Query
    returned: list[str]  # fact ids of the first page, in order
    weak: list[bool] = attrs.Factory(list)  # per returned fact: a weak match, not a match
    candidates: list[str] = attrs.Factory(list)  # the first stage's best 20, before any judge

    def rank(self, *, strong: bool = False) -> int | None:
        """1-based rank of the first expected fact on the page (among the strong matches only
        with ``strong``), None when absent."""
        return next((i for i, (f, w) in enumerate(zip(self.returned, self.weak), 1)
                     if f in self.query.expect and not (strong and w)), None)

    @property
    def strong(self) -> bool:
        """At least one strong match was returned."""
        return not all(self.weak)


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
        return sum(1 for o in on if (r := o.rank(strong=strong)) is not None and r <= k) / max(1, len(on))

    def candidate_recall_at(self, k: int) -> float:
        """Share of on-topic queries with an expected fact among the first stage's ``k`` best:
        what a relevance check can pick from at most."""
        on = self.on_topic
        return sum(1 for o in on if set(o.candidates[:k]) & set(o.query.expect)) / max(1, len(on))

    @property
    def on_topic_silent(self) -> float:
        """Share of on-topic queries answered with nothing at all."""
        on = self.on_topic
        return sum(1 for o in on if not o.returned) / max(1, len(on))

    @property
    def off_topic_strong(self) -> float:
        """Share of off-topic queries answered with a strong match."""
        off = self.off_topic
        return sum(1 for o in off if o.returned and o.strong) / max(1, len(off))

    @property
    def mrr(self) -> float:
        on = self.on_topic
        return sum(1.0 / r for o in on if (r := o.rank())) / max(1, len(on))

    @property
    def off_topic_precision(self) -> float:
        """Share of off-topic queries answered with nothing."""
        off = self.off_topic
        return sum(1 for o in off if not o.returned) / max(1, len(off))

    def summary(self) -> dict[str, Any]:
        return {"mode": self.mode, "queries": len(self.on_topic), "off_topic_queries": len(self.off_topic),
                "recall_at_1": round(self.recall_at(1), 4), "recall_at_3": round(self.recall_at(3), 4),
                "strong_recall_at_3": round(self.recall_at(3, strong=True), 4),
                "candidate_recall_at_10": round(self.candidate_recall_at(10), 4),
                "candidate_recall_at_20": round(self.candidate_recall_at(20), 4),
                "mrr": round(self.mrr, 4), "off_topic_precision": round(self.off_topic_precision, 4),
                "off_topic_strong": round(self.off_topic_strong, 4),
                "on_topic_silent": round(self.on_topic_silent, 4),
                "misses": [{"query": o.query.text, "expect": o.query.expect, "returned": o.returned[:3]}
                           for o in self.outcomes if ((r := o.rank()) is None or r > 3) if o.query.expect
                           or o.returned]}


def load_set(path: Path | None = None, *, name: str = "dev", split: str = "all", store: str = "split") -> EvalSet:
    """An evaluation set; ``split`` keeps the queries of one split.  ``store`` = ``split``
    keeps only the facts of that split's projects, one store per set of projects as a
    project's own store holds its own facts (the issues measured each set as one store);
    ``all`` keeps every fact, the other split's as distractors."""
    if store not in STORES:
        raise ValueError(f"unknown store {store!r}; one of {', '.join(STORES)}")
    text = path.read_text("utf-8") if path else \
        resources.files("realmem.interface").joinpath(f"evalsets/{SETS[name]}").read_text("utf-8")
    data = YAML(typ="safe").load(text)
    facts = list(data["facts"])
    queries = [Query(str(q["q"]), list(q.get("expect") or []), str(q.get("kind") or ""),
                     str(q.get("split") or "tune"), str(q.get("repo") or "")) for q in data["queries"]]
    if split != "all":
        queries = [q for q in queries if q.split == split]
        projects = {q.repo for q in queries if q.repo}
        if store == "split" and projects:  # a set without projects (dev) is one store
            facts = [f for f in facts if _project_of(f) in projects]
    known = {f["id"] for f in facts}  # in the store: a question may not expect another split's fact
    for q in queries:
        unknown = set(q.expect) - known
        if unknown:
            raise ValueError(f"query {q.text!r} expects unknown facts {sorted(unknown)}")
    return EvalSet(facts, queries)


def _project_of(fact: dict[str, Any]) -> str:
    """``openai/codex:AGENTS.md`` -> ``openai/codex``."""
    return str(fact.get("source") or "").partition(":")[0]


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
        # Global paths resolve under the temp dir, never the real ~; the user's own embedding,
        # judge and recall settings in the environment would override the mode's.
        saved = {k: v for k, v in os.environ.items()
                 if k == "HOME" or k.startswith(("REALMEM_EMBEDDING_", "REALMEM_SEMIF_", "REALMEM_RECALL_", "REALMEM_REWRITER_"))}
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
    with _project() as (home, root), FakeEmbeddings(dims=DIMS) as fake, FakeSystemOne(heuristic=False) as judge, \
            FakeChat(judge=judge, heuristic=False) as chat:
        app = open_attached(home, root, scan=False)
        try:
            by_id: dict[str, str] = {}
            for fact in evalset.facts:
                for rel in fact.get("paths") or []:
                    _touch(root, rel)
                store, stored = memories.place(app, "shared", fact.get("paths"))
                m = memories.add(app, fact["caption"], fact["content"], store=store, stored_paths=stored, source="add")
                by_id[m.id] = fact["id"]
            app.config.set("embedding.local", LOCAL.get(mode, "off"))
            if mode == "embedder":
                app.config.set("embedding.url", fake.url)
                app.config.set("embedding.model", fake.models[0])
            if mode in CHAT:
                app.config.set("rewriter.url", chat.url)
                app.config.set("recall.relevance", "chat")
            elif mode in NOISE:
                app.config.set("semif.url", judge.url)
            if mode in NOISE:
                _script_judge(judge, evalset, {ids.short(i): f for i, f in by_id.items()}, NOISE[mode])
            if mode != "bm25":
                progress(f"[{mode}] embedding {count(len(evalset.facts), 'fact')}…")
                embedder.embed_missing(app)
            progress(f"[{mode}] {count(len(evalset.facts), 'fact')} stored; replaying {count(len(evalset.queries), 'query')}…")
            embed = _no_vector if mode == "bm25" else embedder.embed_query
            stores = recall.stores_for(app, None)
            outcomes = []
            for q in evalset.queries:
                first = sorted(recall.matches(app, q.text, stores, embed), key=lambda m: (-m.rrf, m.key))
                res = recall.recall(app, queries=[q.text], embed=embed)
                outcomes.append(Outcome(q, [by_id[i.memory.id] for i in res.items], [i.weak for i in res.items],
                                        [by_id[m.key[1]] for m in first[:20]]))
            return Report(mode, outcomes)
        finally:
            app.close()


def _script_judge(judge: FakeSystemOne, evalset: EvalSet, fact_of: dict[str, str], noise: float) -> None:
    """The System One fake answers recall's relevance question from the set's expected facts:
    the expected candidates share the probability, or ``none`` gets it all.  With ``noise``, that
    share of answers (a fixed draw per question) names a wrong option instead."""
    expected = {" ".join(q.text.split()): set(q.expect) for q in evalset.queries}

    def answer(state: str, question: dict[str, Any]) -> dict[str, Any]:
        asked = state.partition("\n")[0].removeprefix("Question: ")
        options = list(question["criteria"])
        right = [o for o in options if fact_of.get(o) in expected.get(asked, set())]
        # The draw is keyed on the texts, not the ids: ids are new every run, the result must not be.
        texts = sorted(options, key=lambda o: fact_of.get(o, o))
        draw = random.Random("|".join([asked, *(fact_of.get(o, o) for o in texts)]))
        if draw.random() < noise:
            wrong = [o for o in texts if o not in right]
            return {"probabilities": {draw.choice(wrong): 1.0}}
        return {"probabilities": {o: 1.0 for o in right} if right else {relevance.NONE: 1.0}}

    judge.script({relevance.QUESTION if i == 0 else f"{relevance.QUESTION}__{i}": answer for i in range(8)})


def run(modes: tuple[str, ...] = MODES, *, path: Path | None = None, name: str = "dev", split: str = "all",
        store: str = "split", progress: Callable[[str], None] = lambda m: None) -> list[Report]:
    evalset = load_set(path, name=name, split=split, store=store)
    return [run_mode(m, evalset, progress=progress) for m in modes]


def render(reports: list[Report]) -> str:
    rows = [[r.mode, len(r.on_topic), f"{r.recall_at(1):.3f}", f"{r.recall_at(3):.3f}",
             f"{r.recall_at(3, strong=True):.3f}", f"{r.mrr:.3f}", f"{r.on_topic_silent:.3f}",
             f"{r.off_topic_precision:.3f} ({sum(1 for o in r.off_topic if not o.returned)}/{len(r.off_topic)})",
             f"{r.off_topic_strong:.3f}", f"{r.candidate_recall_at(10):.3f}", f"{r.candidate_recall_at(20):.3f}"]
            for r in reports]
    out = [table(["mode", "queries", "recall@1", "recall@3", "strong @3", "MRR", "on-topic silent",
                  "off-topic silent", "off-topic strong", "cand@10", "cand@20"], rows)]
    for r in reports:
        misses = [o for o in r.outcomes if (o.query.expect and ((k := o.rank()) is None or k > 3))
                  or (not o.query.expect and o.returned)]
        if misses:
            out += ["", f"{r.mode}: {len(misses)} miss{'es' if len(misses) != 1 else ''}"]
            out += [f"  {o.query.text!r}: expected {', '.join(o.query.expect) or 'nothing'}; "
                    f"got {', '.join(o.returned[:3]) or 'nothing'}" for o in misses]
    return "\n".join(out)
