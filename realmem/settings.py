"""Settings helpers for /realmem settings: model pickers and connectivity tests."""

from __future__ import annotations

from typing import Any

from realmem.clients.errors import EndpointError, EndpointUnavailable
from realmem.clients.models import list_models, pick_model
from realmem.config import Config
from realmem.jobs.rewrite import bridge

ENDPOINTS = ("semif", "embedding", "rewriter")
REWRITER_BRIDGE = "Pi's current model (bridge)"
REWRITER_UNSET = "not set: Edit/Merge use a deterministic fallback until Pi runs realmem or rewriter.url is set"


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
            if name == "rewriter" and bridge(cfg.home) is not None:
                note = REWRITER_BRIDGE
            results.append({"endpoint": name, "ok": name != "semif", "message": note})
            continue
        try:
            models = list_endpoint_models(cfg, name)
            model = pick_model(str(cfg[f"{name}.model"] or ""), models)
            results.append({"endpoint": name, "ok": True, "message": f"{url} answers; model {model}"})
        except (EndpointError, EndpointUnavailable) as exc:
            results.append({"endpoint": name, "ok": False, "message": str(exc)})
    return results
