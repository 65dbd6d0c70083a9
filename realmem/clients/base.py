"""Common client plumbing: the transport plus a per-client cache of the "(auto)" model."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Self

from realmem.clients.models import AUTO, parse_models, pick_model


class ModelClient:
    """An endpoint bound to one model; "(auto)" is resolved once via /v1/models and cached."""

    endpoint_name = "endpoint"
    settings_prefix: str | None = None  # "semif": hints name semif.url and semif.model


    def __init__(self, url: str, key: str, model: str, timeout: float, key_advice: str = "") -> None:
        from realmem.clients._http import Endpoint  # lazy: httpx loads only with a client; path notes use the judge's pure helpers
        prefix = self.settings_prefix
        self._endpoint = Endpoint(self.endpoint_name, url, key, timeout, key_advice,
                                  setting=f"{prefix}.url" if prefix else None)
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
                available = parse_models(self._endpoint.get("/v1/models"))
                self._resolved_model = pick_model(self._configured_model, available,
                                                  f"{self.settings_prefix}.model" if self.settings_prefix else None)
            return self._resolved_model

    def close(self) -> None:
        self._endpoint.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
