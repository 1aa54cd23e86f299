"""A minimal client for OpenAI-compatible chat completion servers (vLLM, SGLang, TGI, OpenAI).

Evaluation uses it to play episodes against a served model (a vLLM server on a GPU box), so users
can measure a baseline before training and the result after. It works with messages, not tokens:
the server applies the chat template. Standard library only (``urllib`` in a worker thread), with
retries on 429 and 5xx answers and errors that say what the server answered.

Example:
    >>> client = OpenAIChatClient("http://localhost:8000/v1", model="my-model")
    >>> client.url
    'http://localhost:8000/v1/chat/completions'
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class ServerError(RuntimeError):
    """The server could not be reached or answered with an error; the message says which."""


@dataclass
class ChatCompletion:
    """One answer: its text, why it stopped, and the token counts the server reported."""

    text: str
    finish_reason: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0


class OpenAIChatClient:
    """Calls ``POST {base_url}/chat/completions``.

    Args:
        base_url: The API root, e.g. ``http://localhost:8000/v1`` (a trailing ``/chat/completions`` is fine).
        model: The model name the server serves.
        api_key: Sent as a bearer token when set.
        timeout_s: Per-request timeout.
        retries: Extra attempts on connection errors, 429 and 5xx.
    """

    def __init__(
        self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 120.0, retries: int = 2
    ) -> None:
        root = base_url.rstrip("/")
        self.url = root if root.endswith("/chat/completions") else f"{root}/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.retries = retries

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int = 256,
        stop: Sequence[str] = (),
        seed: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> ChatCompletion:
        """One chat completion (blocking); ``extra`` adds server-specific fields to the request.

        Raises:
            ServerError: after the retries, or at once for a 4xx other than 429.
        """
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        if stop:
            payload["stop"] = list(stop)
        if seed is not None:
            payload["seed"] = seed
        payload.update(extra or {})
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return self._parse(response.read())
            except urllib.error.HTTPError as error:
                detail = error.read()[:500].decode(errors="replace")
                if error.code != 429 and error.code < 500 or attempt == self.retries:
                    raise ServerError(f"{self.url} answered HTTP {error.code}: {detail}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                if attempt == self.retries:
                    raise ServerError(f"cannot reach {self.url}: {getattr(error, 'reason', error)}") from None
            time.sleep(0.5 * 2**attempt)
        raise AssertionError("unreachable")

    async def acomplete(self, messages: Sequence[dict[str, str]], **kwargs: Any) -> ChatCompletion:
        """:meth:`complete` in a worker thread, so many requests are in flight at once."""
        return await asyncio.to_thread(self.complete, messages, **kwargs)

    def _parse(self, raw: bytes) -> ChatCompletion:
        try:
            data = json.loads(raw)
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise ServerError(f"{self.url} sent something that is not a chat completion: {raw[:300]!r}") from None
        usage = data.get("usage") or {}
        # Servers cut the stop string off; vLLM says which one matched, and the env needs it (``</answer>``).
        stop_reason = choice.get("stop_reason")
        if isinstance(stop_reason, str) and not text.endswith(stop_reason):
            text += stop_reason
        return ChatCompletion(
            text=text,
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
        )
