"""The viewer's web app: a JSON API over :class:`~agentfly_view.runs.RunDir` objects and one static page.

Starlette (with uvicorn, both already in the trainer's stack through vLLM) serves it; the page's
script and uPlot, the charting library, are package files, so nothing comes from a CDN. Handlers are
plain functions, which Starlette runs in worker threads.

A large run opens at once: while the server runs, a background thread indexes every run (and keeps
indexing what is appended), and a request answers from what is indexed so far (indexing one chunk
itself at most; without the thread, as under a test client, for :data:`BUDGET_S`); the page says how
far indexing has got and refreshes until it is done.

API (all ``GET``, JSON; runs by number, episode sources by their folder inside the run):

- ``/api/runs``: every run, re-read: config, metrics and sources with line, corrupt-line and
  partial-line counts (the page polls it for live refresh).
- ``/api/curves?runs=0,1``: per run, every metric of ``metrics.jsonl`` and per-env episode curves.
- ``/api/episodes?run=0&source=.&success=0&env=...&outcome=...&step=3&min_reward=...&q=text&offset=0&limit=50``:
  one page of the filtered episode list and the filters' choices.
- ``/api/tools?run=0&source=.``: per tool, over the source's episodes: calls per episode, error and timeout
  rates, latency p50 and p95 (:class:`~agentfly_env.core.types.ToolStats`).
- ``/api/episode?run=0&source=.&index=17``: one episode whole, with its tokens when the run kept them.

Every request passes the request guard first (:mod:`agentfly_env.serve.guard`): the page answers only
requests addressed to loopback or ``localhost`` (a DNS-rebinding page is refused) and no web page of another
origin, unless ``rules`` say otherwise.

Example:
    >>> from starlette.testclient import TestClient
    >>> from agentfly_view.synthetic import write_synthetic_run
    >>> import tempfile
    >>> run = RunDir(write_synthetic_run(tempfile.mkdtemp(), episodes=8, per_step=4))
    >>> client = TestClient(create_app([run]), base_url="http://127.0.0.1")
    >>> client.get("/api/episodes", params={"run": 0, "success": 0}).json()["total"] <= 8
    True
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from agentfly_env.serve.guard import GuardRules, RequestGuard
from agentfly_view.runs import EpisodeFilter, EpisodeSource, OutsideRunError, RunDir

#: The page, its script and the vendored charting library.
STATIC = Path(str(resources.files("agentfly_view") / "data"))
MAX_PAGE = 500
#: Seconds a request spends indexing new lines before it answers, when no background thread indexes.
BUDGET_S = 0.3
#: Seconds between the background indexer's looks at files that are caught up (live runs).
WATCH_S = 1.0


class ApiError(Exception):
    """A request the API answers with an error status and a message (never a traceback)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _json(value: Any, status: int = 200) -> Response:
    return Response(msgspec.json.encode(value), status_code=status, media_type="application/json")


def _handler(function: Callable[[Request], Any]) -> Callable[[Request], Response]:
    """A sync endpoint returning JSON; :class:`ApiError` becomes its status and ``{"error": ...}``."""

    def endpoint(request: Request) -> Response:
        try:
            return _json(function(request))
        except ApiError as error:
            return _json({"error": str(error)}, error.status)
        except OutsideRunError as error:  # a run's file swapped for a link elsewhere since it was indexed
            return _json({"error": str(error)}, 403)

    return endpoint


def _number(request: Request, name: str, kind: type = int, default: Any = None) -> Any:
    raw = request.query_params.get(name, "")
    if raw == "":
        return default
    try:
        return kind(raw)
    except ValueError:
        raise ApiError(400, f"{name}={raw!r} is not a number") from None


def create_app(runs: Sequence[RunDir], rules: GuardRules | None = None) -> ASGIApp:
    """The viewer over ``runs`` (their order gives their numbers in the API), behind the request guard
    (``rules``: loopback only, no other origin, by default)."""
    indexer_running = threading.Event()

    def budget() -> float:
        """How long a request indexes: a chunk when the background thread does the rest."""
        return 0.0 if indexer_running.is_set() else BUDGET_S

    def run_at(request: Request, name: str = "run") -> RunDir:
        number = _number(request, name, default=0)
        if not 0 <= number < len(runs):
            raise ApiError(404, f"no run {number}: the viewer has {len(runs)}")
        return runs[number]

    def source_of(request: Request) -> EpisodeSource:
        run = run_at(request)
        name = request.query_params.get("source", ".")
        sources = run.sources(budget())
        if name not in sources:  # only folders found inside the run: never a path the client made up
            raise ApiError(404, f"{run.name} has no episodes at {name!r}")
        return sources[name]

    def list_runs(request: Request) -> list[dict[str, Any]]:
        return [{"id": number, **run.describe(budget())} for number, run in enumerate(runs)]

    def curves(request: Request) -> list[dict[str, Any]]:
        wanted = [part for part in request.query_params.get("runs", "0").split(",") if part]
        out = []
        for part in wanted:
            if not part.isdigit() or int(part) >= len(runs):
                raise ApiError(404, f"no run {part}")
            run = runs[int(part)]
            sources = run.sources(budget())
            root = sources.get(".") or next(iter(sources.values()), None)
            out.append(
                {
                    "id": int(part),
                    "name": run.name,
                    "metrics": run.metric_series(),
                    "episodes": root.episodes.curves() if root is not None else {"x_label": "step", "envs": {}},
                }
            )
        return out

    def episodes(request: Request) -> dict[str, Any]:
        source = source_of(request)
        success = request.query_params.get("success", "")
        where = EpisodeFilter(
            env=request.query_params.get("env") or None,
            success=None if success == "" else success in ("1", "true"),
            min_reward=_number(request, "min_reward", float),
            max_reward=_number(request, "max_reward", float),
            outcome=request.query_params.get("outcome") or None,
            step=_number(request, "step"),
            text=request.query_params.get("q") or None,
        )
        offset = max(0, _number(request, "offset", default=0))
        limit = min(MAX_PAGE, max(1, _number(request, "limit", default=50)))
        selected = source.episodes.select(where)
        return {
            "total": int(len(selected)),
            "offset": offset,
            "rows": [source.episodes.row(number) for number in selected[offset : offset + limit].tolist()],
            "facets": source.episodes.facets(),
            "status": source.status(),
        }

    def tools(request: Request) -> dict[str, Any]:
        source = source_of(request)
        return {"episodes": len(source.episodes), "tools": msgspec.to_builtins(source.episodes.tool_stats())}

    def episode(request: Request) -> dict[str, Any]:
        source = source_of(request)
        number = _number(request, "index")
        if number is None or not 0 <= number < len(source.episodes):
            raise ApiError(404, f"no episode {number}: {len(source.episodes)} in this source")
        try:
            return source.episode(number)
        except msgspec.DecodeError as error:  # indexed as a valid line, changed on disk since
            raise ApiError(409, f"episode {number} no longer decodes ({error}); reload the page") from None

    def page(request: Request) -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        stop = threading.Event()
        indexer = threading.Thread(target=keep_indexed, args=(runs, stop), name="agentfly-view-indexer", daemon=True)
        indexer.start()
        indexer_running.set()
        try:
            yield
        finally:
            indexer_running.clear()
            stop.set()
            indexer.join(timeout=10)

    app = Starlette(
        lifespan=lifespan,
        routes=[
            Route("/", page),
            Route("/api/runs", _handler(list_runs)),
            Route("/api/curves", _handler(curves)),
            Route("/api/episodes", _handler(episodes)),
            Route("/api/tools", _handler(tools)),
            Route("/api/episode", _handler(episode)),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
    )
    return RequestGuard(app, rules or GuardRules(), lambda status, message, path: {"error": message})


def keep_indexed(runs: Sequence[RunDir], stop: threading.Event) -> None:
    """Index every run whole, then what is appended to it, until ``stop`` is set (the server's background
    thread; the files' locks let requests read between its chunks)."""
    while not stop.is_set():
        for run in runs:
            run.metrics.refresh()
            for source in run.sources().values():
                source.tokens.refresh()
                if stop.is_set():
                    return
        stop.wait(WATCH_S)


@contextmanager
def serve_in_thread(app: ASGIApp, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve ``app`` on a free port in a background thread for the block; yields its base URL.

    For tests, benchmarks and notebooks; ``agentfly-view`` itself runs uvicorn in the foreground.
    """
    import uvicorn

    # IPPROTO_TCP named: asyncio then sets TCP_NODELAY on its connections (else Nagle delays responses ~40 ms).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.bind((host, 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the viewer's server did not start")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listener.close()
