"""The event classes: every change to realmem's state is one of these, appended to the log.

Each event is an attrs class whose fields hold everything needed to re-apply it, so replay
never reads a file or calls a service.  ``Envelope`` adds what the log records around it
(sequence number, time, actor).  The cattrs converter (de)serialises payloads; ``TYPES``
maps the stored type name back to its class.  Code reaches these through ``events.types``,
which loads this module on first use.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from realmem.events.values import Action, Fields, Key, record_repr

if TYPE_CHECKING:
    import cattrs


@attrs.frozen(repr=False)
class Event:
    TYPE: ClassVar[str] = ""
    __repr__ = record_repr

    def keys(self) -> list[Key]:
        """Memories this event affects (for incremental projection)."""
        return []

    @property
    def memory_id(self) -> str | None:
        return getattr(self, "id", None)

    @property
    def store_id(self) -> str | None:
        return getattr(self, "store", None)


@attrs.frozen(repr=False)
class StoreRegistered(Event):
    """A store became known: where its files live and which project it belongs to."""

    TYPE: ClassVar[str] = "store_registered"
    store: str
    kind: str  # global | shared | personal
    dir: str
    project_key: str | None = None
    root: str | None = None


@attrs.frozen(repr=False)
class MemoryAdded(Event):
    TYPE: ClassVar[str] = "memory_added"
    store: str
    id: str
    fields: Fields
    source: str  # remember | add | import | consolidate | debug
    decision: int | None = None  # seq of the Decided event that caused it

    def keys(self) -> list[Key]:
        return [Key(self.store, self.id)]


@attrs.frozen(repr=False)
class MemoryEdited(Event):
    """The memory's content, caption or paths changed (edit, merge, widen, manual edit)."""

    TYPE: ClassVar[str] = "memory_edited"
    store: str
    id: str
    fields: Fields
    reason: str  # edit | merge | widen | manual | consolidate-* | prune-paths | approve
    absorbed: list[str] = attrs.field(factory=list)  # ids folded into this memory
    used_delta: int = 0  # used_count carried over from folded memories
    decision: int | None = None

    def keys(self) -> list[Key]:
        return [Key(self.store, self.id)]


@attrs.frozen(repr=False)
class MemoryForgotten(Event):
    TYPE: ClassVar[str] = "memory_forgotten"
    store: str
    id: str
    reason: str  # forget | consolidate-forget | folded | prune-paths

    def keys(self) -> list[Key]:
        return [Key(self.store, self.id)]


@attrs.frozen(repr=False)
class MemoryMoved(Event):
    """Moved between stores (re-scope, or a personal store re-keyed after the first commit)."""

    TYPE: ClassVar[str] = "memory_moved"
    store: str  # the source store
    id: str
    to_store: str
    fields: Fields
    reason: str

    def keys(self) -> list[Key]:
        return [Key(self.store, self.id), Key(self.to_store, self.id)]


@attrs.frozen(repr=False)
class FileObserved(Event):
    """A fact file changed outside realmem (hand edit, git pull, another clone)."""

    TYPE: ClassVar[str] = "file_observed"
    store: str
    id: str
    change: str  # added | changed | deleted
    fields: Fields | None = None  # None when deleted
    quarantine: str | None = None  # safety finding when the new content failed the scan

    def keys(self) -> list[Key]:
        return [Key(self.store, self.id)]


@attrs.frozen(repr=False)
class FileProblem(Event):
    """A file in a store that cannot be read as a fact (reported, never fatal)."""

    TYPE: ClassVar[str] = "file_problem"
    store: str
    file: str
    # malformed | duplicate-id | unreadable | not-a-file | symlink-escape | re-identified |
    # conflict (unresolved merge conflict markers: not served until resolved) |
    # store-escape (file "": the whole store directory is refused) | resolved (gone or fine again)
    problem: str
    message: str
    line: int | None = None
    digest: str = ""  # hash of what was seen, so the same problem is recorded once


@attrs.frozen(repr=False)
class MemoryApproved(Event):
    TYPE: ClassVar[str] = "memory_approved"
    store: str
    id: str

    def keys(self) -> list[Key]:
        return [Key(self.store, self.id)]


@attrs.frozen(repr=False)
class Reinforced(Event):
    TYPE: ClassVar[str] = "reinforced"
    store: str
    id: str
    decision: int | None = None

    def keys(self) -> list[Key]:
        return [Key(self.store, self.id)]


@attrs.frozen(repr=False)
class RecallHit(Event):
    TYPE: ClassVar[str] = "recall_hit"
    hits: list[tuple[str, str]]

    def keys(self) -> list[Key]:
        return [Key(*h) for h in self.hits]


@attrs.frozen(repr=False)
class PathNotesShown(Event):
    TYPE: ClassVar[str] = "path_notes_shown"
    hits: list[tuple[str, str]]
    touched: list[str]
    tool: str

    def keys(self) -> list[Key]:
        return [Key(*h) for h in self.hits]


@attrs.frozen(repr=False)
class UrgencyJudged(Event):
    TYPE: ClassVar[str] = "urgency_judged"
    store: str
    id: str
    valid_for: str  # hash of content + paths the judgement is valid for
    score: float
    probabilities: dict[str, float]
    confidence: float | None
    source: str  # remember | background | debug
    raw: dict[str, Any] = attrs.field(factory=dict)

    def keys(self) -> list[Key]:
        return [Key(self.store, self.id)]


@attrs.frozen(repr=False)
class PathsChecked(Event):
    """Missing-path flags for a memory, with suggested new locations from git renames."""

    TYPE: ClassVar[str] = "paths_checked"
    store: str
    id: str
    missing: dict[str, str | None]  # path -> suggestion

    def keys(self) -> list[Key]:
        return [Key(self.store, self.id)]


@attrs.frozen(repr=False)
class Decided(Event):
    """The remember gate's decision with its full trace (raw answers, thresholds, rule)."""

    TYPE: ClassVar[str] = "decided"
    candidate_id: str
    project_key: str | None
    action: Action
    rule: str
    target: list[str] | None  # [store, id] of the memory acted on
    # The serialised trace: the gate's is ``events.trace.dump(GateTrace)`` (with a version;
    # ``events.trace.load`` reads any version back); consolidation writes its own dict.
    trace: dict[str, Any]

    @property
    def memory_id(self) -> str | None:
        return self.target[1] if self.target else None

    @property
    def store_id(self) -> str | None:
        return self.target[0] if self.target else None


@attrs.frozen(repr=False)
class CandidateQueued(Event):
    TYPE: ClassVar[str] = "candidate_queued"
    candidate_id: str
    project_key: str | None
    cwd: str
    candidate: dict[str, Any]
    reason: str
    next_try: str


@attrs.frozen(repr=False)
class CandidateRetried(Event):
    """A queued candidate's attempt failed again; it stays queued until next_try."""

    TYPE: ClassVar[str] = "candidate_retried"
    candidate_id: str
    reason: str
    next_try: str


@attrs.frozen(repr=False)
class CandidateMoved(Event):
    """A queued candidate follows its project to a new key (a repository's first commit turns
    the path key into the git key), exactly as the personal store does."""

    TYPE: ClassVar[str] = "candidate_moved"
    candidate_id: str
    project_key: str | None
    cwd: str


@attrs.frozen(repr=False)
class CandidateDone(Event):
    TYPE: ClassVar[str] = "candidate_done"
    candidate_id: str
    outcome: str


@attrs.frozen(repr=False)
class ContextImported(Event):
    TYPE: ClassVar[str] = "context_imported"
    path: str
    project_key: str | None
    hash: str
    facts: int


@attrs.frozen(repr=False)
class ImportStarted(Event):
    TYPE: ClassVar[str] = "import_started"
    project_key: str | None
    files: list[str]


@attrs.frozen(repr=False)
class ImportEnded(Event):
    """The end of a session's import: every file was offered to the agent, one at a time."""

    TYPE: ClassVar[str] = "import_ended"
    project_key: str | None


TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls
    for cls in (
        StoreRegistered, MemoryAdded, MemoryEdited, MemoryForgotten, MemoryMoved,
        FileObserved, FileProblem, MemoryApproved, Reinforced, RecallHit, PathNotesShown,
        UrgencyJudged, PathsChecked, Decided, CandidateQueued, CandidateRetried,
        CandidateMoved, CandidateDone, ContextImported, ImportStarted, ImportEnded,
    )
}

@functools.cache
def _converter() -> "cattrs.Converter":
    # cattrs is imported on the first event read or written, not with this module: commands
    # that only read the projections (status, list) never need it.
    import cattrs

    # Without detailed validation: an error names the field less precisely, and decoding
    # (most of replay's fold) is a tenth faster.
    conv = cattrs.Converter(detailed_validation=False)
    # An action this release does not know (a log written by a newer one) loads as its plain
    # string rather than failing the whole read.
    conv.register_structure_hook(Action, lambda v, _: Action(v) if v in Action._value2member_map_ else v)
    conv.register_unstructure_hook(Action, lambda a: getattr(a, "value", a))  # a plain str in the payload, as before
    return conv


@attrs.frozen(repr=False)
class Envelope:
    """An event as stored: its place in the log and who appended it."""

    __repr__ = record_repr

    seq: int
    time: str
    pid: int
    session: str | None
    event: Event


def to_payload(event: Event) -> dict[str, Any]:
    return _converter().unstructure(event)


def from_payload(type_name: str, payload: dict[str, Any]) -> Event:
    try:
        cls = TYPES[type_name]
    except KeyError:
        raise ValueError(f"unknown event type {type_name!r}") from None
    return _converter().structure(payload, cls)
