"""Deterministic stand-in for the SemIf judge, used by the fake when a question is unscripted.

Assumed state format (the judge builds the real one; the parser tolerates variations)::

    Caption: Run e2e tests with pnpm test:e2e          <- the candidate: everything before
    Content: `pnpm test:e2e` needs Docker running.        the "Neighbours:" line
    Neighbours:
    [AZJrPlwafS-aSxwtPk9aaw] Run e2e tests — `pnpm test:e2e` needs Docker.
    [AZJrPmEw1-8Vr0xkmp2Bqw] Lint with eslint - run `pnpm lint` before pushing
      (indented or unprefixed lines continue the previous neighbour)

The heading may read "Neighbours:" or "Neighbors:" (optionally with text before the colon, or
as a Markdown heading).  A neighbour line is ``[<id>]`` then its caption and content
separated by an em dash, en dash, hyphen or colon; only the whole text is compared.  Without
a heading, the candidate is everything before the first ``[<id>]`` line.  Leading labels
(Caption:, Content:, Paths:, Candidate:, ...) are not compared.

Rules, by question name (similarity = Jaccard of lower-cased word tokens):

- ``conflict_with``: a neighbour with the same subject (similarity >= 0.5 once numbers and
  tool names are removed) that differs in its numbers or its tool names ("jest" vs
  "vitest", "port 5432" vs "port 5433");
- ``covered_by``: the most similar non-conflicting neighbour with similarity >= 0.8;
- ``merge_with``: the most similar non-conflicting neighbour with similarity >= 0.5;
- ``action``: Reinforce / Edit / Merge / Add following the three picks above;
- ``answers`` (recall's relevance check, a "Question:" state): the memory holding most of the
  question's words, if it holds at least half of them, else none;
- ``importance``: 0.75 (of the score range) for facts naming commands, flags, paths or
  tools, else 0.45;
- ``durable``: 0.15 when the text says currently, today, WIP, TODO, for now, ...; else 0.9;
- ``unsafe``, ``forget``, ``revise``: 0.05 / 0.1 / 0.1;
- ``scope``: personal for machine-local cues (~/, /home/, locally), global for preferences
  (I prefer, always, never, all projects), else shared; matched against option keys and
  descriptions;
- ``path_urgency``: Mid (0.5 of the range); any other question: the none option, 0.5 or Mid.
"""

from __future__ import annotations

import re
from typing import Any

_HEADING = re.compile(r"^\s*#*\s*neighbou?rs\b[^\n]*:\s*$|^\s*#*\s*neighbou?rs\s*$", re.IGNORECASE)
_NEIGHBOUR = re.compile(r"^\s*(?:[-*]\s*)?\[([A-Za-z0-9_\-]+)\]\s*(.*)$")
_LABEL = re.compile(r"^\s*(?:candidate|new fact|fact|memory|caption|content|paths?|scope)\s*:\s*",
                    re.IGNORECASE | re.MULTILINE)
_TOKEN = re.compile(r"[a-z0-9_]+(?:[./:\-][a-z0-9_]+)*")
_STOPWORDS = frozenset("a an the is are was be to of in on for with and or it its this that by as at "
                       "from use uses using run runs".split())
TOOLS = frozenset("""npm pnpm yarn bun npx node deno pip pipx poetry uv conda pytest unittest nose tox nox
    jest vitest mocha jasmine karma cypress playwright eslint prettier biome ruff black flake8 mypy pyright
    docker podman kubectl helm terraform make cmake ninja bazel cargo rustc go gradle maven mvn
    postgres postgresql mysql sqlite redis mongodb webpack vite rollup esbuild tsc babel git hg""".split())
_TRANSIENT = re.compile(r"\b(currently|today|tonight|tomorrow|right now|for now|wip|todo|this session|"
                        r"temporar(?:y|ily)|at the moment|in progress)\b", re.IGNORECASE)
_TECHNICAL = re.compile(r"`|(?:^|\s)--?[a-z]|\w/\w|\.\w{1,5}\b")
_PERSONAL = re.compile(r"~/|/home/|/users/|\blocally\b|\bmy machine\b|\bthis machine\b", re.IGNORECASE)
_GLOBAL = re.compile(r"\bi prefer\b|\buser prefers\b|\balways\b|\bnever\b|\ball projects\b|\bin general\b",
                     re.IGNORECASE)


def parse_state(state: str) -> tuple[str, dict[str, str]]:
    """(candidate text, {neighbour id: text}) from a judge state string."""
    lines = state.splitlines()
    heading = next((i for i, line in enumerate(lines) if _HEADING.match(line)), None)
    if heading is None:
        heading = next((i for i, line in enumerate(lines) if _NEIGHBOUR.match(line)), len(lines))
        body = lines[heading:]
    else:
        body = lines[heading + 1:]
    candidate = "\n".join(lines[:heading]).strip()
    neighbours: dict[str, str] = {}
    current: str | None = None
    for line in body:
        match = _NEIGHBOUR.match(line)
        if match:
            current = match.group(1)
            neighbours[current] = match.group(2).strip()
        elif current is not None and line.strip():
            neighbours[current] += "\n" + line.strip()
    return candidate, neighbours


def tokens(text: str) -> set[str]:
    return {t for t in _TOKEN.findall(_LABEL.sub("", text).lower()) if t not in _STOPWORDS}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _numbers(toks: set[str]) -> set[str]:
    return {t for t in toks if any(c.isdigit() for c in t)}


def conflicts(candidate: str, neighbour: str) -> bool:
    """Same subject, different numbers or tool names (see the module docstring)."""
    a, b = tokens(candidate), tokens(neighbour)
    nums_a, nums_b = _numbers(a), _numbers(b)
    tools_a, tools_b = a & TOOLS, b & TOOLS
    subject = jaccard(a - nums_a - tools_a, b - nums_b - tools_b)
    differs = bool(nums_a and nums_b and nums_a != nums_b) or bool(tools_a and tools_b and tools_a != tools_b)
    return subject >= 0.5 and differs


class Judgement:
    """The heuristic picks for one state, computed once and read by every question."""

    def __init__(self, state: str) -> None:
        self.candidate, self.neighbours = parse_state(state)
        cand = tokens(self.candidate)
        self.similarity = {nid: jaccard(cand, tokens(text)) for nid, text in self.neighbours.items()}
        self.conflicting = {nid for nid, text in self.neighbours.items() if conflicts(self.candidate, text)}

    def _best(self, offered: list[str], minimum: float, *, conflict: bool) -> tuple[str | None, float]:
        best, best_sim = None, -1.0
        for nid in offered:
            if nid not in self.neighbours or (nid in self.conflicting) != conflict:
                continue
            sim = self.similarity[nid]
            if sim >= minimum and sim > best_sim:
                best, best_sim = nid, sim
        return best, best_sim

    def answering(self, offered: list[str]) -> tuple[str | None, float]:
        """(memory id or None, share): the offered memory holding most of the question's words,
        if it holds at least half of them."""
        asked = tokens(self.candidate.partition("\n")[0].removeprefix("Question:")) - {"question"}
        best, best_share = None, 0.0
        for nid in offered:
            if nid in self.neighbours and asked:
                share = len(asked & tokens(self.neighbours[nid])) / len(asked)
                if share >= 0.5 and share > best_share:
                    best, best_share = nid, share
        return best, best_share

    def pick(self, name: str, offered: list[str]) -> tuple[str | None, float]:
        """(neighbour id or None, similarity) for covered_by / merge_with / conflict_with."""
        if name == "conflict_with":
            return self._best(offered, 0.0, conflict=True)
        return self._best(offered, 0.8 if name == "covered_by" else 0.5, conflict=False)

    def answer(self, name: str, question: dict[str, Any]) -> dict[str, Any]:
        """A script spec (see FakeSystemOne) answering ``question``."""
        qtype = question["type"]
        criteria = question.get("criteria")
        text = self.candidate
        if qtype == "noul":
            if name == "durable":
                return {"noul": 0.15 if _TRANSIENT.search(text) else 0.9}
            return {"noul": {"unsafe": 0.05, "forget": 0.1, "revise": 0.1}.get(name, 0.5)}
        if qtype == "score":
            if name == "importance":
                technical = _TECHNICAL.search(text) or tokens(text) & TOOLS
                return {"score": 0.75 if technical else 0.45}
            return {"score": 0.5}
        options = list(criteria or {})
        if name.split("__")[0] == "answers":  # recall's relevance check (read/relevance.py)
            nid, share = self.answering(options)
            if nid is not None:
                return {"choice": nid, "p": round(0.55 + 0.4 * share, 3)}
        elif name in ("covered_by", "merge_with", "conflict_with"):
            nid, sim = self.pick(name, options)
            if nid is not None:
                return {"choice": nid, "p": round(0.55 + 0.4 * min(sim, 1.0), 3)}
        elif name == "action":
            ids = list(self.neighbours)
            wanted = "add"
            for pick, action in (("covered_by", "reinforce"), ("conflict_with", "edit"), ("merge_with", "merge")):
                if self.pick(pick, ids)[0] is not None:
                    wanted = action
                    break
            return {"choice": _match_option(criteria, wanted), "p": 0.85}
        elif name == "scope":
            wanted = ("personal" if _PERSONAL.search(text)
                      else "global" if _GLOBAL.search(text) else "shared")
            return {"choice": _match_option(criteria, wanted), "p": 0.8}
        none = "none" if "none" in options else options[0]
        return {"choice": none, "p": 0.9}


def _match_option(criteria: Any, word: str) -> str:
    """The option whose key or description mentions ``word``, else the first option."""
    options: dict[str, Any] = {str(k): v for k, v in dict(criteria or {}).items()}
    for key in options:
        if word in key.lower():
            return key
    for key, description in options.items():
        if word in str(description).lower():
            return key
    return next(iter(options))
