"""Common client plumbing: the transport plus a per-process cache of the "(auto)" model."""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Self

from realmem.clients.models import AUTO, parse_models, pick_model

# Every remember builds new clients, so "(auto)" is resolved once per process per
# (URL, key, configured model) rather than per client.  Entries expire so a long-running rpc
# child notices a server whose models changed; only successful picks are stored.
AUTO_MODEL_TTL = 600.0  # seconds; read at each lookup
_auto_models: dict[tuple[str, str, str], tuple[str, float]] = {}  # -> (model, monotonic time picked)


def forget_auto_models() -> None:
    """Drop every resolved "(auto)" model (tests: a new fake may reuse an old port)."""
    _auto_models.clear()


class ModelClient:
    """An endpoint bound to one model; "(auto)" is resolved via /v1/models (see AUTO_MODEL_TTL)
    and kept for the client's life, so one client never switches models midway."""

    endpoint_name = "endpoint"
    settings_prefix: str | None = None  # "semif": hints name semif.url and semif.model


    def __init__(self, url: str, key: str, model: str, timeout: float, key_advice: str = "") -> None:
        from realmem.clients._http import Endpoint  # lazy: httpx loads only with a client; path notes use the judge's pure helpers
        prefix = self.settings_prefix
        self._endpoint = Endpoint(self.endpoint_name, url, key, timeout, key_advice,
                                  setting=f"{prefix}.url" if prefix else None)
        self._key = key or ""
        self._configured_model = (model or "").strip()
        self._resolved_model: str | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """Base URL without /v1 (may be empty: calls then raise NotConfigured)."""
        return self._endpoint.url

    @property
    def configured(self) -> bool:
        return self._endpoint.configured

    @property
    def model(self) -> str:
        """The model requests name, resolving "(auto)" on first use."""
        if self._configured_model and self._configured_model != AUTO:
            return self._configured_model
        with self._lock:
            if self._resolved_model is None:
                self._resolved_model = self._auto_model()
            return self._resolved_model

    def _auto_model(self) -> str:
        cache_key = (self.url, self._key, self._configured_model)
        cached = _auto_models.get(cache_key)  # single dict reads/writes are atomic: no lock
        if cached is not None and time.monotonic() - cached[1] < AUTO_MODEL_TTL:
            return cached[0]
        available = parse_models(self._endpoint.get("/v1/models"))
        model = pick_model(self._configured_model, available,
                           f"{self.settings_prefix}.model" if self.settings_prefix else None)
        _auto_models[cache_key] = (model, time.monotonic())
        return model

    def close(self) -> None:
        self._endpoint.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
