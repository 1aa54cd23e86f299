"""The gateway's HTTP server: OpenAI's chat completions, answered by the trainer's generator, recorded per episode.

Routes (a base URL per episode, ``http://HOST:PORT/episodes/{key}/v1``, is what a program gives
``openai.OpenAI(base_url=...)``; the plain ``/v1`` routes take the key as the API key instead):

* ``POST /episodes/{key}/v1/chat/completions`` and ``POST /v1/chat/completions`` with
  ``Authorization: Bearer {key}``
* ``POST /episodes/{key}/v1/responses`` and ``POST /v1/responses``: OpenAI's Responses API, converted onto
  the same core (:mod:`~agentfly_train.gateway.responses`)
* ``POST /episodes/{key}/v1/messages`` and ``POST /v1/messages`` with ``x-api-key: {key}``: Anthropic's
  Messages API (:mod:`~agentfly_train.gateway.messages`), errors in Anthropic's shape
* ``GET /episodes/{key}/v1/models`` and ``GET /v1/models``

A call is validated (:mod:`~agentfly_train.gateway.protocol`), rendered to prompt tokens with the
chat template (:mod:`~agentfly_train.gateway.rendering`), sampled by the generator through a
:class:`~agentfly_train.generation.scheduler.GenerationScheduler` (calls of all open episodes share
its batches), recorded into its episode's rows (:mod:`~agentfly_train.gateway.recording`), and
answered with the sampled text and the tool calls parsed from it. A prompt that fills the context
window is answered at once with ``finish_reason="length"`` and no text.

Every request passes the request guard first (:mod:`agentfly_env.serve.guard`, errors in OpenAI's shape):
on loopback, a ``Host`` that is not loopback and a web page of another origin are refused; a body over
``max_request_bytes`` is a 413, one nested too deep a 400. A call is parsed and rendered (the part whose cost
grows with the request) in worker threads of the gateway's own, each with its own copy of the tokenizer, so
one episode's long request does not hold the event loop that serves every other episode.

Example:
    >>> gateway = Gateway(generator, tokenizer, GatewaySettings(max_model_len=4096))  # doctest: +SKIP
    >>> with BackgroundGateway(gateway) as running:  # doctest: +SKIP
    ...     episode = running.open_episode()
    ...     client = openai.OpenAI(base_url=episode.base_url, api_key=episode.key)
    ...     client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "hi"}])
    ...     recording = running.close_episode(episode.key)
    >>> recording.rows[0].action_mask  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import functools
import json
import secrets
import socket
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agentfly_env.serve.guard import GuardRules, RequestGuard, is_loopback
from agentfly_train.chat import ChatFormat
from agentfly_train.gateway.messages import message_body, message_events, parse_messages_request
from agentfly_train.gateway.protocol import (
    ChatRequest,
    ErrorShape,
    RequestError,
    anthropic_error,
    completion_body,
    openai_error,
    parse_request,
    stream_chunks,
)
from agentfly_train.gateway.recording import EpisodeRecording
from agentfly_train.gateway.rendering import ChatRenderer, RenderError
from agentfly_train.gateway.responses import parse_responses_request, response_body, response_events
from agentfly_train.gateway.tool_calls import ToolCallText, openai_tool_call
from agentfly_train.gateway.tools import EpisodeTools
from agentfly_train.generation import Generation, GenerationRequest, Generator, SamplingParams
from agentfly_train.generation.scheduler import GenerationScheduler

T = TypeVar("T")


@dataclass(frozen=True)
class GatewaySettings:
    """How the gateway answers.

    Attributes:
        model: The model name it reports (any name a program sends is accepted).
        max_model_len: The context window: prompt plus completion, in tokens. A trainer's gateway gives the model's
            own (its max positions), as an API serving it would: a program's long prompt is answered, not cut.
        max_episode_tokens: Most tokens an episode's rows may hold, what its update trains on (0: no limit). A
            call gets no more completion than is left; once it is spent the episode is over
            (:attr:`~agentfly_train.gateway.EpisodeCounters.over_budget`) and its later calls are answered at once
            with ``finish_reason="length"`` and no text.
        sampling: How calls are sampled (a trainer's: :meth:`SamplingParams.from_rollout`, as its env loop samples):
            ``max_new_tokens``, the most per completion (a request's ``max_tokens`` may ask for fewer); the
            ``temperature`` and ``top_p`` of a request that gives none (of every request under ``fixed_sampling``);
            ``top_k`` for every call (OpenAI's API has no such field). A request's stop strings are its own, and the
            chat template's end-of-turn tokens end every completion.
        fixed_sampling: Ignore a request's ``temperature``, ``top_p`` and ``seed``: a trainer's gateway samples every
            call as the run says (the update scores the sampled tokens at the run's temperature, and a group's
            chains must not share a program's fixed seed).
        parser: How the model writes tool calls (a name :func:`~agentfly_env.tools.parsing.get_parser` knows).
        batch_wait_s: Longest wait for more calls before a partial batch starts (a sync generator).
        max_batch_size: Most calls per generator batch.
        seed: Seeds the sampling, with the episode (its key, or the seed it was opened with) and the call number,
            when a request gives no seed.
        max_request_bytes: Largest request body (a 413 past it). 1 MiB is about 400k tokens of text, far past
            any context window a CPU run uses, and renders in under a second.
        render_threads: Worker threads that parse and render calls (each holds a copy of the tokenizer): a long
            call takes one, and the others' calls go on through the rest.
    """

    model: str = "agentfly-policy"
    max_model_len: int = 4096
    max_episode_tokens: int = 0
    sampling: SamplingParams = SamplingParams(max_new_tokens=1024)
    fixed_sampling: bool = False
    parser: str = "hermes"
    batch_wait_s: float = 0.05
    max_batch_size: int = 64
    seed: int = 0
    max_request_bytes: int = 1 << 20
    render_threads: int = 2


@dataclass(frozen=True)
class _Answer:
    """One answered call, in the chat core's terms, for a dialect to write out.

    Attributes:
        request: The call as the chat request it means.
        call: Its number in the episode (from 1).
        message: The assistant message in the chat shape (``content``, ``tool_calls``).
        finish_reason: OpenAI's (``stop``, ``tool_calls``, ``length``).
        stop_sequence: The request's stop string that ended it, if one did.
        usage: ``prompt_tokens``, ``completion_tokens``, ``total_tokens``.
    """

    request: ChatRequest
    call: int
    message: dict[str, Any]
    finish_reason: str
    stop_sequence: str | None
    usage: dict[str, int]


@dataclass(frozen=True)
class EpisodeEndpoint:
    """Where one episode's program calls the model: ``openai.OpenAI(base_url=base_url, api_key=key)``; and its
    env's tools over MCP, ``tools_url``, when it was opened with an env that has tools (else None)."""

    key: str
    base_url: str
    tools_url: str | None = None


class Gateway:
    """An OpenAI-compatible endpoint per episode, answered by ``generator`` and recorded token-exact.

    Its methods run on the event loop that serves it (:meth:`start`); :class:`BackgroundGateway` runs
    one in a thread for sync code.

    Args:
        generator: The policy's generator (sync ones are batched, async ones get each call directly).
        tokenizer: The policy's tokenizer, with its chat template.
        settings: Context window, sampling defaults, tool-call format, batching.
    """

    def __init__(self, generator: Generator, tokenizer: Any, settings: GatewaySettings | None = None) -> None:
        self.settings = settings or GatewaySettings()
        self.chat = ChatFormat(tokenizer)
        self.tool_text = ToolCallText(self.settings.parser)
        self.renderer = ChatRenderer(self.chat, self.tool_text)
        self._renderers = threading.local()  # each render thread's own (a tokenizer's encode is not thread-safe)
        self._render_pool: ThreadPoolExecutor | None = None
        self.scheduler = GenerationScheduler(
            generator, batch_wait_s=self.settings.batch_wait_s, max_batch_size=self.settings.max_batch_size
        )
        self.episodes: dict[str, EpisodeRecording] = {}
        self.seeds: dict[str, int] = {}  # an episode's sampling seed, where it was opened with one
        self.closed: set[str] = set()  # to tell a late call "closed" rather than "unknown"
        self.url = ""
        self.tools = EpisodeTools()
        self.app = Starlette(
            routes=[
                Route("/episodes/{key}/v1/chat/completions", self._in_path(self._chat), methods=["POST"]),
                Route("/episodes/{key}/v1/responses", self._in_path(self._responses), methods=["POST"]),
                Route("/episodes/{key}/v1/models", self._in_path(self._models), methods=["GET"]),
                Route("/v1/chat/completions", self._by_api_key(self._chat), methods=["POST"]),
                Route("/v1/responses", self._by_api_key(self._responses), methods=["POST"]),
                Route("/episodes/{key}/v1/messages", self._in_path(self._messages, anthropic_error), methods=["POST"]),
                Route("/v1/messages", self._by_api_key(self._messages, anthropic_error), methods=["POST"]),
                Route("/v1/models", self._by_api_key(self._models), methods=["GET"]),
                self.tools.route,
            ],
            exception_handlers={HTTPException: _http_error, Exception: _server_error},
        )
        self._stack = contextlib.AsyncExitStack()

    # ----------------------------------------------------------------- serving and episodes

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on ``host:port`` (0: a free port) until :meth:`stop`; returns the server's URL."""
        # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on connections of such a listener. Without it
        # Nagle's algorithm holds each response's body (uvicorn writes headers and body apart) ~40 ms for an ACK.
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        self.url = f"http://{host}:{listener.getsockname()[1]}"
        # Beyond loopback (a trainer's gateway for programs on other machines), any Host name is the machine's.
        rules = GuardRules(max_body_bytes=self.settings.max_request_bytes, allow_remote=not is_loopback(host))
        app = RequestGuard(self.app, rules, _dialect_error)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
        self._render_pool = ThreadPoolExecutor(
            self.settings.render_threads, thread_name_prefix="agentfly-gateway-render"
        )
        self._stack.callback(self._render_pool.shutdown, cancel_futures=True)
        await self._stack.enter_async_context(self.scheduler.running())
        await self._stack.enter_async_context(self.tools.running())  # uvicorn runs no lifespan: start it here
        serving = asyncio.create_task(server.serve(sockets=[listener]))
        self._stack.push_async_callback(self._shutdown, server, serving, listener)
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        if serving.done():
            serving.result()  # the error it stopped with
        return self.url

    async def stop(self) -> None:
        """Stop serving (open episodes stay readable)."""
        await self._stack.aclose()

    @staticmethod
    async def _shutdown(server: uvicorn.Server, serving: asyncio.Task[None], listener: socket.socket) -> None:
        server.should_exit = True
        await serving
        listener.close()

    def open_episode(self, *, seed: int | None = None, tools_env: Any = None) -> EpisodeEndpoint:
        """A new episode: its key (also its API key) and its base URL.

        Args:
            seed: Seeds its calls' sampling (with each call's number), so a replayed episode samples alike;
                default: its random key does.
            tools_env: An in-process env whose open episode this one plays: its tools are served over MCP at
                the endpoint's ``tools_url`` (None for an env without tools).
        """
        key = f"ep-{secrets.token_hex(12)}"
        self.episodes[key] = EpisodeRecording()
        if seed is not None:
            self.seeds[key] = seed
        self.scheduler.join()
        tools_path = self.tools.open(key, tools_env) if tools_env is not None else None
        return EpisodeEndpoint(
            key=key,
            base_url=f"{self.url}/episodes/{key}/v1",
            tools_url=f"{self.url}{tools_path}" if tools_path else None,
        )

    def close_episode(self, key: str) -> EpisodeRecording:
        """End an episode and take its rows and counters; later calls with its key get a 404.

        Raises:
            KeyError: No open episode has this key.
        """
        recording = self.episodes.pop(key)
        self.seeds.pop(key, None)
        self.tools.close(key)
        self.closed.add(key)
        self.scheduler.leave()
        return recording

    # ----------------------------------------------------------------- routes

    @staticmethod
    def _in_path(route: Callable[[Request, str], Any], shape: ErrorShape = openai_error) -> Callable[[Request], Any]:
        """An endpoint for ``route`` on ``/episodes/{key}/v1/...``: the episode's key is in the path; errors in
        ``shape``."""

        async def endpoint(request: Request) -> Response:
            return await _answer(lambda: route(request, request.path_params["key"]), shape)

        return endpoint

    @staticmethod
    def _by_api_key(route: Callable[[Request, str], Any], shape: ErrorShape = openai_error) -> Callable[[Request], Any]:
        """An endpoint for ``route`` on ``/v1/...``: the episode's key is the API key."""

        async def endpoint(request: Request) -> Response:
            return await _answer(lambda: route(request, _api_key(request)), shape)

        return endpoint

    async def _models(self, request: Request, key: str) -> Response:
        self._recording(key)
        model = {"id": self.settings.model, "object": "model", "created": 0, "owned_by": "agentfly"}
        return JSONResponse({"object": "list", "data": [model]})

    async def _chat(self, request: Request, key: str) -> Response:
        answer = await self._complete(request, key, parse_request)
        completion_id, created, model = f"chatcmpl-{key}-{answer.call}", int(time.time()), self.settings.model
        if not answer.request.stream:
            return JSONResponse(
                completion_body(completion_id, created, model, answer.message, answer.finish_reason, answer.usage)
            )
        usage = answer.usage if answer.request.include_usage else None
        chunks = stream_chunks(completion_id, created, model, answer.message, answer.finish_reason, usage)
        events = [f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
        return StreamingResponse(iter(events), media_type="text/event-stream")

    async def _responses(self, request: Request, key: str) -> Response:
        answer = await self._complete(request, key, parse_responses_request)
        whole = response_body(
            f"resp_{key}_{answer.call}",
            int(time.time()),
            self.settings.model,
            answer.message,
            answer.finish_reason,
            answer.usage,
        )
        return JSONResponse(whole) if not answer.request.stream else _event_stream(response_events(whole))

    async def _messages(self, request: Request, key: str) -> Response:
        answer = await self._complete(request, key, parse_messages_request)
        whole = message_body(
            f"msg_{key}_{answer.call}",
            self.settings.model,
            answer.message,
            answer.finish_reason,
            answer.stop_sequence,
            answer.usage,
        )
        return JSONResponse(whole) if not answer.request.stream else _event_stream(message_events(whole))

    async def _complete(self, request: Request, key: str, parse: Callable[[bytes], ChatRequest]) -> _Answer:
        """One call of any dialect (``parse`` turns its body into the chat request it means) rendered, sampled
        and recorded."""
        entered = time.perf_counter()
        recording = self._recording(key)
        raw = await request.body()
        assert self._render_pool is not None, "the gateway is not started"
        body, prompt, opening = await asyncio.get_running_loop().run_in_executor(
            self._render_pool, self._prepare, parse, raw, dict(recording.sampled_turns)
        )
        recording.counters.calls += 1
        call = recording.counters.calls
        generation, generator_s = await self._sample(prompt, body, key, call, recording)
        if self.episodes.get(key) is not recording:  # closed while the model sampled: its rows are taken
            raise self._not_found(key)
        if generation.token_ids:
            recording.record(prompt, generation, len(opening))
        message, finish_reason, stop_sequence, turn = self._message(generation, body, call, opening)
        recording.counters.tool_calls += len(message.get("tool_calls", ()))
        recording.counters.cut_calls += finish_reason == "length"
        if turn is not None:  # sent back unchanged, this message is its sampled ids in later prompts
            text, sampled = turn
            recording.sampled_turns[text] = sampled
        completion = len(generation.token_ids)
        usage = {
            "prompt_tokens": len(prompt),
            "completion_tokens": completion,
            "total_tokens": len(prompt) + completion,
        }
        recording.counters.added_latency_s.append(time.perf_counter() - entered - generator_s)
        return _Answer(body, call, message, finish_reason, stop_sequence, usage)

    # ----------------------------------------------------------------- a call's parts

    def _prepare(
        self, parse: Callable[[bytes], ChatRequest], raw: bytes, sampled_turns: Mapping[str, list[int]]
    ) -> tuple[ChatRequest, list[int], list[int]]:
        """A request body parsed and rendered to prompt tokens, in a render thread with its own renderer; and the
        turn's forced opening (a call's start, for ``tool_choice`` required or a named function), which ends the
        prompt: the model writes the rest of the call, and only what it writes is trained."""
        renderer = getattr(self._renderers, "renderer", None)
        if renderer is None:
            chat = ChatFormat(copy.deepcopy(self.chat.tokenizer), self.chat.observation_role)
            renderer = self._renderers.renderer = ChatRenderer(chat, self.tool_text)
        body = parse(raw)
        try:
            prompt = renderer.encode(body.messages, body.tools, sampled_turns)
        except RenderError as error:
            raise RequestError(str(error), "messages") from None
        opening: list[int] = []
        if body.tool_choice == "required":
            try:
                opening = renderer.chat.template_ids(self.tool_text.forced_opening(body.tool_name))
            except ValueError as error:
                raise RequestError(f"tool_choice {body.tool_name or 'required'!r}: {error}", "tool_choice") from None
        return body, prompt + opening, opening

    def _recording(self, key: str) -> EpisodeRecording:
        recording = self.episodes.get(key)
        if recording is None:
            raise self._not_found(key)
        return recording

    def _not_found(self, key: str) -> RequestError:
        state = "has ended" if key in self.closed else "is not open"
        return RequestError(f"episode {key!r} {state}", status=404, code="episode_not_found")

    async def _sample(
        self, prompt: list[int], body: ChatRequest, key: str, call: int, recording: EpisodeRecording
    ) -> tuple[Generation, float]:
        """The generator's continuation and the seconds spent waiting for it (no room left in the context window or
        the episode's budget: an empty one)."""
        settings = self.settings
        room = settings.max_model_len - len(prompt)
        sampling = settings.sampling
        budget = min(body.max_tokens or sampling.max_new_tokens, sampling.max_new_tokens, room)
        left = settings.max_episode_tokens - recording.tokens_with(prompt) if settings.max_episode_tokens else budget
        if left <= 0 or recording.counters.over_budget:  # the episode is over, whatever the program does next
            recording.counters.over_budget = True
            return Generation([], [], "length"), 0.0
        if budget <= 0:
            return Generation([], [], "length"), 0.0
        fixed = settings.fixed_sampling
        params = dataclasses.replace(
            sampling,
            temperature=sampling.temperature if fixed or body.temperature is None else body.temperature,
            top_p=sampling.top_p if fixed or body.top_p is None else body.top_p,
            stop=body.stop,
            stop_token_ids=tuple(sorted(self.chat.end_of_turn_ids)),
        )
        episode = self.seeds.get(key, key)
        # A trainer's chains must differ: a program's fixed seed would make a group's chains sample alike.
        seed = (
            body.seed
            if body.seed is not None and not fixed
            else zlib.crc32(f"{settings.seed}/{episode}/{call}".encode())
        )
        started = time.perf_counter()
        generation = await self.scheduler.generate(GenerationRequest(prompt, min(budget, left), seed), params)
        # Cut by what was left of the episode's budget, not by the call's own limits: the rows are full.
        recording.counters.over_budget |= (
            bool(settings.max_episode_tokens) and left <= budget and generation.finish_reason == "length"
        )
        return generation, time.perf_counter() - started

    def _message(
        self, generation: Generation, body: ChatRequest, call: int, opening: list[int]
    ) -> tuple[dict[str, Any], str, str | None, tuple[str, list[int]] | None]:
        """The assistant message, OpenAI's finish reason and the stop string that ended it (if one did) for a
        continuation after the turn's forced ``opening``, and the message's entry for the episode's sampled turns
        (:meth:`~agentfly_train.gateway.rendering.ChatRenderer.sampled_turn`: the opening's ids and the sampled ones)."""
        turn_ids = opening + generation.token_ids if generation.token_ids else []  # none: past the context window
        text = self.chat.tokenizer.decode(turn_ids, skip_special_tokens=True)
        cut = generation.finish_reason == "stop_string"
        stopped = next((stop for stop in body.stop if text.endswith(stop)), None) if cut else None
        if stopped is not None:  # OpenAI leaves the stop sequence out, so the text is no longer the sampled ids' text
            text = text[: -len(stopped)]
        content, calls = self.tool_text.read(text) if body.tools else (text, [])
        turn = None if cut else self.renderer.sampled_turn(content, calls, turn_ids)
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        if calls:
            message["tool_calls"] = [openai_tool_call(c, f"call_{call}_{i}") for i, c in enumerate(calls)]
        if generation.finish_reason == "length":
            return message, "length", stopped, turn
        return message, "tool_calls" if calls else "stop", stopped, turn


async def _answer(route: Callable[[], Any], shape: ErrorShape) -> Response:
    """A route's answer; a :class:`RequestError` as the dialect's error JSON."""
    try:
        return await route()
    except RequestError as error:
        return JSONResponse(shape(error), status_code=error.status)


def _event_stream(events: list[dict[str, Any]]) -> StreamingResponse:
    """Server-sent events named by their ``type``, as the Responses and Messages APIs stream."""
    lines = [f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n" for event in events]
    return StreamingResponse(iter(lines), media_type="text/event-stream")


def _api_key(request: Request) -> str:
    """The episode's key sent as the API key: ``Authorization: Bearer KEY`` (OpenAI's clients) or
    ``x-api-key: KEY`` (Anthropic's)."""
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    key = key.strip() if scheme.lower() == "bearer" else request.headers.get("x-api-key", "").strip()
    if not key:
        raise RequestError(
            "no episode: use the episode's base URL, or send its key as 'Authorization: Bearer KEY' or 'x-api-key'",
            status=401,
            code="invalid_api_key",
        )
    return key


#: What a 404 lists: the routes the gateway serves.
ROUTES = (
    "POST /episodes/KEY/v1/chat/completions, POST /episodes/KEY/v1/responses, POST /episodes/KEY/v1/messages, "
    "GET /episodes/KEY/v1/models "
    "(or /v1/... with the key as the API key), and the episode's tools at /episodes/KEY/mcp"
)


def _dialect_error(status: int, message: str, path: str) -> dict[str, Any]:
    """An error outside a route (the guard's refusals, Starlette's 404, a failure), in the shape of the dialect
    its path speaks."""
    shape = anthropic_error if path.endswith("/messages") else openai_error
    return shape(RequestError(message, status=status))


async def _http_error(request: Request, error: Exception) -> Response:
    """Starlette's own errors (no such route, wrong method) in the dialect's shape; a 404 lists the routes."""
    assert isinstance(error, HTTPException)
    message = str(error.detail)
    if error.status_code in (404, 405):
        message = f"{message}: {request.method} {request.url.path}; the gateway serves {ROUTES}"
    return JSONResponse(_dialect_error(error.status_code, message, request.url.path), status_code=error.status_code)


async def _server_error(request: Request, error: Exception) -> Response:
    """A failure of the gateway or the generator: the program gets OpenAI's error JSON, the server goes on."""
    body = _dialect_error(500, f"{type(error).__name__}: {error}", request.url.path)
    return JSONResponse(body, status_code=500)


class BackgroundGateway:
    """A :class:`Gateway` served from a thread of its own, for sync code (tests, a sync trainer loop).

    Example:
        >>> with BackgroundGateway(gateway) as running:  # doctest: +SKIP
        ...     episode = running.open_episode()
    """

    def __init__(self, gateway: Gateway, host: str = "127.0.0.1", port: int = 0) -> None:
        self.gateway = gateway
        self.host = host
        self.port = port
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="agentfly-gateway", daemon=True)

    def __enter__(self) -> BackgroundGateway:
        self.thread.start()
        self._on_loop(self.gateway.start(self.host, self.port))
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._on_loop(self.gateway.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
            self.loop.close()

    @property
    def url(self) -> str:
        return self.gateway.url

    def open_episode(self, *, seed: int | None = None, tools_env: Any = None) -> EpisodeEndpoint:
        """:meth:`Gateway.open_episode`, on the gateway's loop."""
        return self._on_loop(_call(functools.partial(self.gateway.open_episode, seed=seed, tools_env=tools_env)))

    def close_episode(self, key: str) -> EpisodeRecording:
        """:meth:`Gateway.close_episode`, on the gateway's loop."""
        return self._on_loop(_call(self.gateway.close_episode, key))

    def _on_loop(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()


async def _call(function: Callable[..., T], *args: Any) -> T:
    return function(*args)
