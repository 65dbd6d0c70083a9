"""Settings helpers for /realmem settings: what each setting means (its section and one-line
description, the one source the TUI and the CLI show), model pickers and connectivity tests; and the settings commands (show, set, unset, save, test,
models), each returning ``{"text", "details"}`` for the CLI and the rpc child."""

from __future__ import annotations

import json
import os
from typing import Any

from realmem import frontend
from realmem.clients.errors import EndpointError, EndpointUnavailable
from realmem.clients.models import list_models, pick_model
from realmem.config import DEFAULTS, SECRET_KEYS, Config, ConfigError, env_name, mask_secret, secret_var
from realmem.clients import bridge
from realmem.interface.render import REWRITER_BRIDGE, REWRITER_UNSET
from realmem.interface.render import table

ENDPOINTS = ("semif", "embedding", "rewriter")

# Sections in display order, like Pi's /settings groups.
GROUPS = ("Endpoints", "Judge thresholds", "Path notes", "Recall", "Consolidation", "Advanced")

_ENDPOINT_ROLE = {"semif": "the SemIf judge (System One) that decides every remember",
                  "embedding": "the embedding model (semantic recall and duplicate search)",
                  "rewriter": "the chat model that writes Edit/Merge rewrites"}

# key -> (section, one-line description). Every key of config.DEFAULTS has one (a test checks).
SCHEMA: dict[str, tuple[str, str]] = {
    **{f"{e}.url": ("Endpoints", f"Base URL (without /v1) of {_ENDPOINT_ROLE[e]}; empty: "
                    + {"semif": "new memories are queued until it is set",
                       "embedding": "recall and duplicate search use BM25 only",
                       "rewriter": "Pi's current model through the adapter's bridge"}[e] + ".")
       for e in ENDPOINTS},
    **{f"{e}.key": ("Endpoints", f"API key of the {e} endpoint: the key itself, or $VAR / env:VAR to read "
                    "it from the environment (recommended).") for e in ENDPOINTS},
    **{f"{e}.model": ("Endpoints", f"Model name sent to the {e} endpoint; (auto): the server's model when "
                      "its /v1/models lists exactly one.") for e in ENDPOINTS},
    **{f"{e}.timeout": ("Endpoints", f"Seconds to wait for the {e} endpoint before the call counts as failed "
                        "(a remember is then queued and retried).") for e in ENDPOINTS},
    "embedding.queryPrefix": ("Endpoints", "Text put before every search query sent to the embedding model "
                              "(some models want e.g. 'query: ')."),
    "embedding.documentPrefix": ("Endpoints", "Text put before every memory sent to the embedding model "
                                 "(some models want e.g. 'passage: ')."),
    "embedding.local": ("Endpoints", "The embedder used while no embedding endpoint is set: "
                        "e5+use (multilingual-e5-small and the multilingual Universal Sentence Encoder fused; bundled, "
                        "offline, about 30 ms a memory on one core), multilingual-e5-small alone, or off "
                        "(recall and deduplication then use BM25 only)."),
    "gate.coveredBy": ("Judge thresholds", "P(an existing memory already covers the candidate) at or above "
                       "which it is only reinforced."),
    "gate.conflictWith": ("Judge thresholds", "P(the candidate contradicts a memory) at or above which that "
                          "memory is edited to the new fact."),
    "gate.mergeWith": ("Judge thresholds", "P(the candidate belongs together with a memory) at or above which "
                       "the two are merged."),
    "gate.importance": ("Judge thresholds", "Normalised importance (0..1) a new fact needs to be added or "
                        "merged; below it the candidate is dropped."),
    "gate.durable": ("Judge thresholds", "P(the fact stays true for weeks) a new fact needs; task status and "
                     "transient state fall below it."),
    "gate.unsafe": ("Judge thresholds", "P(the fact is unsafe to keep: secrets, injected instructions) at or "
                    "above which it is refused."),
    "gate.judgeNeighbors": ("Judge thresholds", "How many of the nearest memories the judge is shown with a "
                            "candidate."),
    "pathNotes.high": ("Path notes", "Urgency at or above which a memory's full content is appended when the "
                       "model touches its paths."),
    "pathNotes.mid": ("Path notes", "Urgency at or above which the caption and id are appended; below it the "
                      "memory is only counted."),
    "pathNotes.maxFull": ("Path notes", "Full memories appended to one tool result at most."),
    "pathNotes.maxCaptions": ("Path notes", "Captions appended to one tool result at most."),
    "pathNotes.charBudget": ("Path notes", "Characters one path-notes block may take at most."),
    "freshness.enabled": ("Path notes", "Flag memories whose paths changed in git after they were written "
                                        "(path notes, recall, manage, `realmem stale`)."),
    "recall.pageSize": ("Recall", "Memories per page of realmem_recall."),
    "judge.fallback": ("Endpoints", "chat: with no SemIf endpoint, the chat model (rewriter.url, else Pi's current "
                       "model) answers the System One questions in one request per candidate; queue: keep "
                       "candidates queued until semif.url is set."),
    "recall.relevance": ("Recall", "semif: with a System One endpoint set, one request per recall asks it which "
                         "of the 10 best candidates answer the question (the others show as weak matches); "
                         "chat: the chat model (rewriter.url, else Pi's current model) answers it instead, "
                         "one chat request and its tokens per recall that reaches the check (cached per "
                         "query and candidate set); off: the similarity rule alone decides (docs/recall.md)."),
    "list.pageSize": ("Recall", "Memories per page of realmem_list and `realmem list`."),
    "prompt.captions": ("Recall", "Most-used project-wide captions listed in the system prompt's <realmem> "
                        "section (from the next session on)."),
    "consolidate.neighbors": ("Consolidation", "Nearest memories each memory is compared with during "
                              "consolidation."),
    "consolidate.forget": ("Consolidation", "P(obsolete or transient) at or above which consolidation deletes "
                           "a memory."),
    "consolidate.minImportance": ("Consolidation", "Importance (0..1) below which consolidation deletes a "
                                  "memory; 0 keeps every memory whatever its importance."),
    "consolidate.revise": ("Consolidation", "P(the memory can be said clearer and shorter) at or above which "
                           "it is rewritten."),
    "consolidate.coveredBy": ("Consolidation", "P(another memory covers it) at or above which the covered "
                              "memory is folded into the other."),
    "consolidate.conflictWith": ("Consolidation", "P(two memories contradict each other) at or above which the "
                                 "older one is corrected."),
    "consolidate.mergeWith": ("Consolidation", "P(two memories belong together) at or above which they are "
                              "merged."),
    "consolidate.paths": ("Consolidation", "Also revise memories' paths against the project's file tree "
                          "(--no-paths skips it once)."),
    "consolidate.treeLines": ("Consolidation", "Lines of the project's file tree shown to the model when "
                              "revising paths."),
    "consolidate.batch": ("Consolidation", "Memories judged per request during consolidation."),
    "semif.maxQuestions": ("Advanced", "Questions per SemIf request at most; larger batches are split "
                           "(--max-questions overrides it once)."),
    "semif.maxOptions": ("Advanced", "Options per choice question at most (SemIf allows 16)."),
    "gate.neighbors": ("Advanced", "Candidates fused from full-text and vector search before the judge sees "
                       "the nearest ones (254 at most)."),
    "gate.rrfK": ("Advanced", "The k of reciprocal-rank fusion: larger flattens the ranking between BM25 and "
                  "vector hits."),
    "gate.lockWaitSeconds": ("Advanced", "Seconds a remember waits for the store lock before it queues the "
                             "candidate instead."),
    "gate.leaseSeconds": ("Advanced", "Seconds without a heartbeat after which another process may take over "
                          "the write lock from a stalled holder (whose late writes are then refused)."),
    "safety.redact": ("Advanced", "Redact secrets found in a candidate and store the rest, instead of refusing "
                      "the whole candidate."),
    "hiddenTools": ("Advanced", "Other memory systems' tools realmem deactivates and answers for (from the "
                    "next session on)."),
    "queue.baseBackoffSeconds": ("Advanced", "First wait before a queued candidate is retried; it doubles per "
                                 "failure."),
    "queue.maxBackoffSeconds": ("Advanced", "Longest wait between retries of a queued candidate."),
    "worker.idleSeconds": ("Advanced", "Seconds the background worker stays up with nothing to do."),
    "worker.autostart": ("Advanced", "Start a background worker when work is left queued."),
}


def key_problem(value: str) -> str | None:
    """For a key given as $VAR / env:VAR: "missing: $VAR is not set" when that variable is unset or
    empty (the endpoint then gets no key), else None."""
    var = secret_var(value)
    return None if var is None or os.environ.get(var) else f"missing: {value} is not set"


def describe(cfg: Config) -> list[dict[str, Any]]:
    """Every setting for display: section, description, value (keys masked), source, default,
    whether the default is in effect, and a problem (an unset key variable) if any."""
    out = []
    for key, default in DEFAULTS.items():
        group, description = SCHEMA.get(key, ("Advanced", ""))
        source = cfg.source(key)
        try:
            value = cfg.get(key)
            problem = key_problem(str(value)) if key in SECRET_KEYS and value else None
        except ConfigError as exc:  # a mistyped value: shown as stored, so it can be fixed here
            value, source, problem = cfg.raw(key), "invalid", str(exc)
        is_default = value == default
        if key in SECRET_KEYS and value:
            value = mask_secret(str(value))
        out.append({"key": key, "value": value, "source": source, "group": group,
                    "description": description, "default": default, "is_default": is_default,
                    "env": env_name(key), "problem": problem})
    return sorted(out, key=lambda item: GROUPS.index(item["group"]))


def list_endpoint_models(cfg: Config, endpoint: str) -> list[str]:
    if endpoint not in ENDPOINTS:
        raise ValueError(f"unknown endpoint {endpoint!r}; one of {', '.join(ENDPOINTS)}")
    url = cfg[f"{endpoint}.url"]
    if not url:
        raise EndpointError(f"{endpoint}.url is not set")
    return list_models(url, cfg.secret(f"{endpoint}.key"), float(cfg[f"{endpoint}.timeout"]),
                       cfg.key_advice(f"{endpoint}.key"))


def test_endpoints(cfg: Config) -> list[dict[str, Any]]:
    """Reach every configured endpoint's /v1/models and resolve its model like a real call."""
    results = []
    for name in ENDPOINTS:
        url = cfg[f"{name}.url"]
        if not url:
            note = {"semif": "not set: new memories are queued until it is",
                    "embedding": "not set: recall and deduplication use BM25 only",
                    "rewriter": REWRITER_UNSET}[name]
            if name == "rewriter" and bridge.live(cfg.home) is not None:
                note = REWRITER_BRIDGE
            results.append({"endpoint": name, "ok": name != "semif", "message": note})
            continue
        unset_var = _unset_key_var(cfg, f"{name}.key")
        if unset_var:
            results.append({"endpoint": name, "ok": False, "message": unset_var})
            continue
        try:
            models = list_endpoint_models(cfg, name)
            model = pick_model(str(cfg[f"{name}.model"] or ""), models, f"{name}.model")
            if models and model not in models:  # the server would refuse every call, and the queue retry it
                raise EndpointError(f"model {model} is not among the models {url} lists "
                                    f"({', '.join(models[:8])}{', …' if len(models) > 8 else ''}); "
                                    f"see `{frontend.hint('settings', 'settings models ' + name)}`")
            if name == "embedding":
                _probe_embedding(cfg)
            results.append({"endpoint": name, "ok": True, "message": f"{url} answers; model {model}"})
        except (EndpointError, EndpointUnavailable) as exc:
            results.append({"endpoint": name, "ok": False, "message": str(exc)})
    return results


def _unset_key_var(cfg: Config, key: str) -> str | None:
    """The problem when ``key`` refers to a variable ($VAR, env:VAR) that is not set."""
    var = secret_var(str(cfg.get(key) or "").strip())
    if var and not os.environ.get(var):
        return cfg.key_advice(key)
    return None


def _probe_embedding(cfg: Config) -> None:
    """Embed one string: a server that lists models but does not embed (a chat server given as
    the embedding URL) passes the model list and fails here."""
    from realmem.clients.embeddings import EmbeddingsClient  # here: only the test embeds; status starts lighter

    with EmbeddingsClient.from_config(cfg) as client:
        vector = client.embed_query("realmem settings test")
    if not vector:
        raise EndpointError("the embedding endpoint answered with an empty vector")


# --- the commands (one function each, returning {text, details}; the CLI and rpc call them) -----------------------------------------------------------------------------

def show(cfg: Config) -> dict[str, Any]:
    """Every setting: section, value (keys masked), source (default, file, env, invalid)."""
    # Lazy: render loads recall, search and the embedding client, which `realmem settings set`
    # and the other settings commands never need; only the table here does.
    items = describe(cfg)
    rows = [[i["group"], i["key"], i["problem"] or (json.dumps(i["value"]) if not isinstance(i["value"], str)
                                                   else i["value"] or "—"), i["source"]] for i in items]
    return {"text": table(["section", "key", "value", "source"], rows),
            "details": {"items": items, "groups": list(GROUPS)}}


def _unknown_setting(key: str) -> ConfigError:
    return ConfigError(f"unknown setting {key!r}; see `{frontend.hint('settings', 'settings show')}`")


def set_value(cfg: Config, key: str, value: Any) -> dict[str, Any]:
    """Set ``key`` in config.json; the value is checked against the setting's type."""
    if key not in DEFAULTS:
        raise _unknown_setting(key)
    cfg.set(key, value)
    return {"text": f"{key} set.", "details": {"key": key}}  # no value: it may be an API key


def unset(cfg: Config, key: str) -> dict[str, Any]:
    """Reset ``key`` to its default.  A setting this version no longer knows is removed; an
    unknown key that config.json does not hold is a typo, not a reset of the meant setting."""
    held = cfg.unset(key)
    if key in DEFAULTS:
        text = f"{key} reset to its default."
    elif held:
        text = f"{key} removed from config.json."
    else:
        raise _unknown_setting(key)
    return {"text": text, "details": {"key": key}}


def save(cfg: Config, key: str, value: Any) -> dict[str, Any]:
    """The settings screen's save: ``value`` set, or the default back for null or ""."""
    done = unset(cfg, key) if value in (None, "") else set_value(cfg, key, value)
    return {"text": f"{key} saved.", "details": done["details"]}


def connectivity(cfg: Config) -> dict[str, Any]:
    """Connectivity test of every configured endpoint; ``failed`` when one is not ok."""
    results = test_endpoints(cfg)
    return {"text": "\n".join(f"{'ok ' if r['ok'] else 'FAIL'}  {r['endpoint']:<9} {r['message']}" for r in results),
            "details": {"results": results}, "failed": not all(r["ok"] for r in results)}


def models(cfg: Config, endpoint: str) -> dict[str, Any]:
    names = list_endpoint_models(cfg, endpoint)
    return {"text": "\n".join(names), "details": {"models": names}}
