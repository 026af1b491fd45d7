"""Which model name to send: asked of the server (``GET /v1/models``) when the user gave none.

A server started with one model answers OpenAI requests only under that model's name, which
is often its path (``transformers serve --force-model /models/x`` lists ``/models/x``; SGLang
and vLLM list ``--served-model-name``, else the path). A guessed name gets HTTP 400/404, so
``tuneledger run bench`` and plans without a ``model`` ask the server instead.
"""

from __future__ import annotations

import httpx

from ledger.errors import InvalidInput
from runners.bench.client import WarmupFailed, describe_error


class ModelUnknown(InvalidInput):
    """The server lists no model, or several and none is the one configured (exit 3: give --model)."""


def served_model(url: str, preferred: str | None = None, *, timeout_s: float = 30.0) -> str:
    """The model id to send to the server at ``url`` (base URL, no path).

    The only model ``GET {url}/v1/models`` lists; with several, ``preferred`` (the
    configuration's model) when it is among them.

    Raises:
        WarmupFailed: the server cannot be reached or answers an error (exit 13, like a warmup).
        ModelUnknown: no model listed, or several without ``preferred`` among them.
    """
    models_url = url.rstrip("/") + "/v1/models"
    try:
        response = httpx.get(models_url, timeout=timeout_s, trust_env=False)
        response.raise_for_status()
        ids = [
            str(m["id"])
            for m in response.json().get("data", [])
            if isinstance(m, dict) and "id" in m
        ]
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise WarmupFailed(
            f"cannot ask {models_url} which model it serves: {describe_error(exc, models_url)}"
        ) from None
    if len(ids) == 1:
        return ids[0]
    if preferred is not None and preferred in ids:
        return preferred
    if not ids:
        raise ModelUnknown(
            f"{models_url} lists no model: give the model name (--model, or model = in [bench])"
        )
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    raise ModelUnknown(
        f"{models_url} lists {len(ids)} models ({shown}): say which with --model (or model = in [bench])"
    )
