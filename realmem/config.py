"""Settings: REALMEM_HOME layout, config.json (mode 0600), defaults and environment overrides.

Every key is dotted (``semif.url``) and may be overridden by ``REALMEM_SEMIF_URL``.  Key
values written as ``$VAR`` or ``env:VAR`` are resolved from the environment at use time so
secrets never land in config.json.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from realmem.errors import UsageError
from realmem.frontend import set_in
from realmem.storage.fsutil import atomic_write_text, private_dir

DEFAULTS: dict[str, Any] = {
    # Endpoints (url = base URL without /v1).  realmem ships with none.
    "semif.url": "",
    "semif.key": "",
    "semif.model": "",
    "semif.timeout": 30.0,
    "semif.maxQuestions": 8,          # questions per System One request
    "semif.maxOptions": 16,           # options per choice question (SemIf allows 16)
    "embedding.url": "",
    "embedding.key": "",
    "embedding.model": "",
    "embedding.timeout": 30.0,
    "embedding.queryPrefix": "",
    "embedding.documentPrefix": "",
    "embedding.local": "e5+use",  # the bundled embedder used while embedding.url is empty; "off" disables it
    "rewriter.url": "",               # empty: the Pi model bridge when the adapter runs
    "rewriter.key": "",
    "rewriter.model": "",
    "rewriter.timeout": 60.0,
    # With no semif.url: "chat" asks the chat endpoint (rewriter.url, else Pi's model over the
    # bridge) the System One questions; "queue" keeps candidates queued until semif.url is set.
    "judge.fallback": "chat",
    # Remember gate thresholds (spec: "Decision").
    "gate.neighbors": 254,            # RRF-fused neighbours at most
    "gate.judgeNeighbors": 15,        # neighbours shown to the judge
    "gate.rrfK": 60,
    "gate.coveredBy": 0.6,
    "gate.conflictWith": 0.6,
    "gate.mergeWith": 0.6,
    "gate.importance": 0.35,          # normalised importance (0..1) needed for Add / Merge
    "gate.durable": 0.5,
    "gate.unsafe": 0.5,
    "gate.lockWaitSeconds": 120.0,    # queue instead of failing after this
    "gate.leaseSeconds": 30.0,        # a write lease not renewed for this long may be taken over
    # Safety scan.
    "safety.redact": False,
    # Path notes (spec: "Shown on touch").
    "pathNotes.high": 1.5,
    "pathNotes.mid": 0.75,
    "pathNotes.maxFull": 2,
    "pathNotes.maxCaptions": 6,
    "pathNotes.charBudget": 2400,
    "freshness.enabled": True,        # flag memories whose paths changed in git after `updated`
    # Recall and listing.
    "recall.pageSize": 8,
    "recall.relevance": "semif",      # with semif.url set, System One checks recall's top candidates; "chat": the chat model does; "off": similarity alone
    "list.pageSize": 30,
    "prompt.captions": 12,            # most-used project-wide captions in the <realmem> section
    # Hidden tools of other memory systems.
    "hiddenTools": ["ctx_memory"],
    # Consolidation.
    "consolidate.neighbors": 12,
    "consolidate.forget": 0.7,
    "consolidate.minImportance": 0.5,
    "consolidate.revise": 0.7,
    "consolidate.coveredBy": 0.6,
    "consolidate.conflictWith": 0.6,
    "consolidate.mergeWith": 0.6,
    "consolidate.paths": True,
    "consolidate.treeLines": 400,
    "consolidate.batch": 20,
    # Queue / worker.
    "queue.baseBackoffSeconds": 5.0,
    "queue.maxBackoffSeconds": 900.0,
    "worker.idleSeconds": 600.0,
    "worker.autostart": True,         # start a worker when work is left behind
}

SECRET_KEYS = {"semif.key", "embedding.key", "rewriter.key"}

# Thresholds compared with a probability or a normalised (0..1) score: outside 0..1 one would
# decide every case alike (35, meant as percent, rejects every memory).
UNIT_KEYS = {"gate.coveredBy", "gate.conflictWith", "gate.mergeWith", "gate.importance", "gate.durable",
             "gate.unsafe", "consolidate.forget", "consolidate.minImportance", "consolidate.revise",
             "consolidate.coveredBy", "consolidate.conflictWith", "consolidate.mergeWith"}


# Pairs whose first value must not exceed the second: inverted, one rule never fires (a path
# note "mid" above "high" makes every mid note a full one; a base backoff above the cap).
ORDERED = (("pathNotes.mid", "pathNotes.high"), ("gate.judgeNeighbors", "gate.neighbors"),
           ("queue.baseBackoffSeconds", "queue.maxBackoffSeconds"))


# Settings with a fixed set of values.
CHOICES = {"embedding.local": ("e5+use", "multilingual-e5-small", "off"), "recall.relevance": ("semif", "chat", "off"),
           "judge.fallback": ("chat", "queue")}


# Command-line overrides for this process (``--max-questions``): they win over the environment
# and config.json, are never saved, and are not inherited by processes it starts.
_OVERRIDES: dict[str, Any] = {}


def override(key: str, value: Any) -> None:
    if key not in DEFAULTS:
        raise ConfigError(f"unknown setting {key!r}")
    _OVERRIDES[key] = value


def home_dir(explicit: str | Path | None = None) -> Path:
    """REALMEM_HOME, default ``~/.pi/agent/realmem``.  One that cannot name a directory (a
    symlink loop, bytes that are not UTF-8) is a usage error here, not a traceback later."""
    raw = explicit or os.environ.get("REALMEM_HOME")
    try:
        home = Path(raw).expanduser().resolve() if raw else Path.home() / ".pi" / "agent" / "realmem"
        str(home).encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"the realmem home {_shown(str(raw or Path.home()))} is not valid UTF-8") from None
    except (RuntimeError, OSError) as exc:  # pathlib (3.11) reports a symlink loop as RuntimeError
        raise UsageError(f"the realmem home {_shown(str(raw))} cannot be used: {exc}") from None
    return home


def _shown(text: str) -> str:
    """``text`` printable whatever it holds (undecodable bytes arrive as lone surrogates)."""
    return ascii(text)[1:-1][:200]


def env_name(key: str) -> str:
    return "REALMEM_" + key.upper().replace(".", "_")


def _coerce(value: str, default: Any) -> Any:
    if isinstance(default, bool):
        word = value.strip().lower()
        if word not in {"1", "true", "yes", "on", "0", "false", "no", "off", ""}:
            raise ValueError(f"{value!r} is not true or false")
        return word in {"1", "true", "yes", "on"}
    if isinstance(default, int) and not isinstance(default, bool):
        return int(value)
    if isinstance(default, float):
        return float(value)
    if isinstance(default, list):
        v = value.strip()
        return json.loads(v) if v.startswith("[") else [s.strip() for s in v.split(",") if s.strip()]
    return value


def secret_var(value: str) -> str | None:
    """The variable a ``$VAR`` / ``${VAR}`` / ``env:VAR`` key refers to; None for a literal key."""
    if value.startswith("env:"):
        return value[4:]
    if value.startswith("$") and len(value) > 1:
        return value[1:].strip("{}")
    return None


def check(key: str, value: Any) -> Any:
    """``value`` as the type ``key``'s default has, or ConfigError.  Every path that sets or
    reads a setting goes through this (rpc and CLI set, config.json, environment), so a
    value of the wrong type is refused where it enters, not at every later use."""
    default = DEFAULTS[key]
    try:
        if isinstance(value, str) and not isinstance(default, str):
            value = _coerce(value, default)
    except ValueError as exc:
        if isinstance(default, bool):
            raise ConfigError(f"{key}: {exc}") from None
        # else the text stays a string and fails the type check below, in the setting's words
    if isinstance(default, bool):
        ok = isinstance(value, bool)
        want = "true or false"
    elif isinstance(default, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # 254.0 from a JSON writer that knows only numbers
        ok = isinstance(value, int) and not isinstance(value, bool)
        want = "a whole number"
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        value = float(value) if ok else value
        want = "a number"
    elif isinstance(default, list):
        ok = isinstance(value, list) and all(isinstance(x, str) for x in value)
        want = "a list of strings"
    else:
        ok = isinstance(value, str) and "\x00" not in value and _utf8(value)
        want = "a string of valid UTF-8"
    if not ok:
        shown = "" if key in SECRET_KEYS else f", not {json.dumps(value, default=str)[:80]}"  # never a key
        raise ConfigError(f"{key} must be {want}{shown}")
    if key in UNIT_KEYS and not 0 <= value <= 1:
        raise ConfigError(f"{key} must be between 0 and 1, not {value}")
    if key in CHOICES and value not in CHOICES[key]:
        raise ConfigError(f"{key} must be one of {', '.join(CHOICES[key])}, not {json.dumps(value)[:80]}")
    return value


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes that were not UTF-8, passed on as lone surrogates
        return False
    return True


def resolve_secret(value: str, origin: str = "the key") -> str:
    """``$VAR`` / ``env:VAR`` -> the variable's value (empty if unset); anything else as is.
    A key goes into an HTTP header, which carries printable ASCII only: anything else is
    refused here, naming where it came from (``origin``, or the variable) and never the value."""
    var = secret_var(value)
    out = value if var is None else os.environ.get(var, "")
    if not out.isascii() or any(c < " " or c == "\x7f" for c in out):
        raise ConfigError(f"{var or origin} holds characters an HTTP header cannot carry (only printable ASCII)")
    return out


class Config:
    """config.json merged over DEFAULTS, with REALMEM_* environment overrides on top."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / "config.json"
        self._file: dict[str, Any] = {}
        self.reload()

    def embedding_enabled(self) -> bool:
        """An embedder is meant: the configured endpoint, else the bundled local model."""
        return bool(self["embedding.url"]) or self["embedding.local"] != "off"

    def reload(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self._file = data if isinstance(data, dict) else {}
        except FileNotFoundError:
            self._file = {}
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{self.path}: cannot read config: {exc}") from exc

    def _get(self, key: str) -> Any:
        if key in _OVERRIDES:
            return _OVERRIDES[key]
        default = DEFAULTS.get(key)
        env = os.environ.get(env_name(key))
        if env is not None:
            if default is None:
                return env
            try:
                return check(key, env)
            except ConfigError as exc:
                raise ConfigError(f"{env_name(key)}: {exc}") from None
        if key in self._file:
            if default is None:
                return self._file[key]
            try:
                return check(key, self._file[key])
            except ConfigError as exc:
                raise ConfigError(f"{self.path}: {exc} (fix it with `realmem settings set` or unset it)") from None
        return default

    def get(self, key: str) -> Any:
        """The value, checked on its own and, for an ORDERED pair, against its partner (set by
        config.json or the environment, an inverted pair is refused where it is used)."""
        value = self._get(key)
        inverted = self._inverted(key, value)
        if inverted:
            low, lo, high, hi = inverted
            raise ConfigError(f"{low} ({lo:g}) is above {high} ({hi:g}); fix it {set_in(low)}")
        return value

    def _inverted(self, key: str, value: Any) -> tuple[str, Any, str, Any] | None:
        """(low key, its value, high key, its value) when ``value`` for ``key`` inverts a pair."""
        for low, high in ORDERED:
            if key in (low, high):
                lo, hi = (value, self._get(high)) if key == low else (self._get(low), value)
                if lo > hi:
                    return low, lo, high, hi
        return None

    def __getitem__(self, key: str) -> Any:
        return self.get(key)

    def secret(self, key: str) -> str:
        """A key setting with $VAR / env:VAR resolved."""
        return resolve_secret(str(self.get(key) or ""), env_name(key) if self.source(key) == "env" else key)

    def key_advice(self, key: str) -> str:
        """What to check when the server refuses the key in setting ``key`` (401): the setting's
        name and, for a ``$VAR`` / ``env:VAR`` reference, whether that variable is set.  Never
        the key itself."""
        raw = str(self.get(key) or "").strip()
        origin = f" (from {env_name(key)})" if self.source(key) == "env" else ""
        var = secret_var(raw)
        if not raw:
            return f"{key} is not set; set it {set_in(key)}"
        if var is None:
            return f"check {key}{origin}"
        if os.environ.get(var):
            return f"{key} is {raw}{origin}; {var} is set, but the server refused its value"
        return f"{key} is {raw}{origin}, but {var} is not set in realmem's environment"

    def source(self, key: str) -> str:
        if key in _OVERRIDES:
            return "command line"
        if env_name(key) in os.environ:
            return "env"
        return "file" if key in self._file else "default"

    def set(self, key: str, value: Any) -> None:
        if key not in DEFAULTS:
            raise ConfigError(f"unknown setting {key!r}")
        value = check(key, value)
        inverted = self._inverted(key, value)
        if inverted:
            low, lo, high, hi = inverted
            raise ConfigError(f"{low} ({lo:g}) must not be above {high} ({hi:g}); "
                              f"change {high if key == low else low} first")
        self._file[key] = value
        self.save()

    def unset(self, key: str) -> bool:
        """Remove ``key`` from config.json; whether the file held it."""
        held = key in self._file
        self._file.pop(key, None)
        self.save()
        return held

    def save(self) -> None:
        private_dir(self.home)
        atomic_write_text(self.path, json.dumps(self._file, indent=2, sort_keys=True) + "\n", mode=0o600)

    def items(self) -> list[tuple[str, Any, str]]:
        """(key, display value, source) for every known key; keys are masked."""
        out = []
        for key in DEFAULTS:
            value = self.get(key)
            if key in SECRET_KEYS and value:
                value = mask_secret(str(value))
            out.append((key, value, self.source(key)))
        return out

    def raw(self, key: str) -> Any:
        """The value as stored (environment, else config.json), unchecked: for showing a
        mistyped setting so the user can see what to fix."""
        return os.environ.get(env_name(key), self._file.get(key))


def mask_secret(value: str) -> str:
    if value.startswith(("$", "env:")):
        return value  # a reference, not the secret
    return "****" + value[-4:] if len(value) > 8 else "****"


class ConfigError(UsageError, ValueError):
    pass
