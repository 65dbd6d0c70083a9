"""Model listing and "(auto)" selection shared by the settings picker and every client.

System One servers answer ``GET /v1/models`` with ``{"models": [{"name", ...}]}``, OpenAI
compatible ones with ``{"data": [{"id"}]}``; both are read so one picker serves all endpoints.
"""

from __future__ import annotations

from typing import Any

from realmem.clients.errors import EndpointError
from realmem.frontend import set_in

AUTO = "(auto)"


def parse_models(body: Any) -> list[str]:
    """Model names from either /v1/models shape, in server order."""
    if not isinstance(body, dict):
        raise EndpointError("the server's /v1/models answer is not a JSON object")
    names: list[str] = []
    for entry in body.get("models") or []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            names.append(entry["name"])
        elif isinstance(entry, str):
            names.append(entry)
    for entry in body.get("data") or []:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            names.append(entry["id"])
    return list(dict.fromkeys(names))


def list_models(url: str, key: str, timeout: float, key_advice: str = "") -> list[str]:
    """Fetch the model names a server offers (``url`` is the base without /v1)."""
    # Imported here: `status` reaches this module through settings, and the HTTP layer
    # (httpx) would be most of its start-up.
    from realmem.clients._http import Endpoint

    endpoint = Endpoint("model list", url, key, timeout, key_advice)
    try:
        return parse_models(endpoint.get("/v1/models"))
    finally:
        endpoint.close()


def pick_model(configured: str, available: list[str], setting: str | None = None) -> str:
    """The configured model, or for "(auto)"/empty the server's only model; ``setting`` is
    the config key of the model, named when the user must choose."""
    configured = (configured or "").strip()
    if configured and configured != AUTO:
        return configured
    if len(available) == 1:
        return available[0]
    if not available:
        raise EndpointError(f"the server lists no models; set a model name {set_in(setting)}")
    raise EndpointError(f"the server lists several models ({', '.join(available)}); "
                        f"pick one {set_in(setting)}")
