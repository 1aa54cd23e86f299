"""``agentfly-serve ENV_ID``: serve a registered env over OpenEnv's protocol.

Example:
    agentfly-serve AgentFly/Math-v0 --env-kwargs '{"difficulty": 1}' --port 8000 --max-sessions 512

then ``GenericEnvClient(base_url="http://127.0.0.1:8000")`` (openenv) or
``gym.make("AgentFly/Remote-v0", url="http://127.0.0.1:8000")`` plays it. The server listens on
loopback and answers only requests addressed to loopback or ``localhost``, from no web page of another
origin (:mod:`agentfly_env.serve.guard`); ``--allow-remote`` lets it listen on another address and answer
any ``Host``, ``--allow-host`` and ``--allow-origin`` add one name or origin; ``--token`` (or
``AGENTFLY_SERVE_TOKEN``) makes every route but ``/health`` require ``Authorization: Bearer <token>``.
``--mcp`` serves the env's tools over MCP on stdin/stdout instead (:mod:`agentfly_env.serve.mcp`).

A reset's ``info["task"]`` goes out without the task's gold fields (its answer, hidden tests, target:
:data:`~agentfly_env.core.tasks.GOLD_FIELDS`), so a client that shows the info to an agent leaks nothing; the
reward is computed on the server and needs none of them on the client. ``--send-gold`` sends them, for
trainers that want them (a client that reaches the server then can read every answer).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import os
import sys

import gymnasium as gym

import agentfly_env  # noqa: F401  (registers the ids)
from agentfly_env.serve.guard import add_guard_arguments, bind_refusal, is_loopback
from agentfly_env.serve.server import ServeConfig, create_app, make_server

#: The cyclic GC's thresholds while serving (Python's defaults: 700, 10, 10).
SERVING_GC_THRESHOLDS = (100_000, 50, 10)


def tune_gc_for_serving() -> None:
    """Make the cyclic GC rarer in the server process, and keep what the start made out of its scans.

    Every open session holds a few hundred objects the GC tracks (uvicorn's and websockets' connection
    state, tasks, frames), and each collection that runs while they live scans them all again: at 2,048
    concurrent sessions the default thresholds spent 0.3-0.5 ms of CPU per session in the GC, about half
    of the server's whole cost. A young collection every 100k net allocations (not 700) and a full one
    every ~50M still reclaim the cycles a closed session leaves; ``gc.freeze`` moves the modules and the
    app, which live as long as the process, out of every collection.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVING_GC_THRESHOLDS)


def build_parser() -> argparse.ArgumentParser:
    defaults = ServeConfig()
    parser = argparse.ArgumentParser(prog="agentfly-serve", description=__doc__.partition("\n\n")[0])
    parser.add_argument(
        "env_id",
        help="a registered env id, AgentFly/<Name>-v<N> (module:id imports the module first, as gym.make does)",
    )
    parser.add_argument("--env-kwargs", type=json.loads, default={}, help="JSON object of gym.make keyword arguments")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback)")
    parser.add_argument("--port", type=int, default=8000)
    add_guard_arguments(parser)
    parser.add_argument("--max-sessions", type=int, default=defaults.max_sessions, help="envs alive at once")
    parser.add_argument("--max-queue", type=int, default=defaults.max_queue, help="sessions that may wait for an env")
    parser.add_argument("--queue-timeout", type=float, default=defaults.queue_timeout_s, help="seconds a session waits")
    parser.add_argument(
        "--idle-timeout", type=float, default=defaults.idle_timeout_s, help="close sessions silent this long (seconds)"
    )
    parser.add_argument("--max-message-bytes", type=int, default=defaults.max_message_bytes)
    parser.add_argument("--token", default=os.environ.get("AGENTFLY_SERVE_TOKEN"), help="required bearer token")
    parser.add_argument(
        "--send-gold",
        action="store_true",
        help="send each task's gold fields (answer, golden_answers, tests, ...) in a reset's info; by default "
        "they stay on the server (the reward is computed here and needs none of them on the client)",
    )
    parser.add_argument(
        "--compression",
        action="store_true",
        help="accept WebSocket per-message deflate (off by default: about 40 KiB of zlib state per session, "
        "and CPU on every frame, for small JSON frames)",
    )
    parser.add_argument("--log-level", default="warning")
    parser.add_argument(
        "--mcp", action="store_true", help="serve the env's tools over MCP on stdin/stdout instead (one client)"
    )
    parser.add_argument("--seed", type=int, default=None, help="with --mcp: the first episode's seed")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module, _, env_id = args.env_id.rpartition(":")
    try:
        if module:
            importlib.import_module(module)  # registers the id
        gym.spec(env_id)
    except (ImportError, gym.error.Error) as error:
        print(f"agentfly-serve: {error}", file=sys.stderr)
        return 2
    if args.mcp:
        from agentfly_env.serve.mcp import serve_stdio

        asyncio.run(serve_stdio(env_id, args.env_kwargs, seed=args.seed))
        return 0
    refusal = bind_refusal("agentfly-serve", args.host, args.allow_remote)
    if refusal:
        print(f"{refusal} (and --token to require a bearer token)", file=sys.stderr)
        return 2
    if not is_loopback(args.host) and not args.token:
        print(f"agentfly-serve: serving {args.host} without --token: anyone who reaches it can play", file=sys.stderr)
    config = ServeConfig(
        max_sessions=args.max_sessions,
        max_queue=args.max_queue,
        queue_timeout_s=args.queue_timeout,
        idle_timeout_s=args.idle_timeout,
        max_message_bytes=args.max_message_bytes,
        token=args.token,
        send_gold=args.send_gold,
        compression=args.compression,
        allow_remote=args.allow_remote,
        allowed_hosts=tuple(args.allow_host),
        allowed_origins=tuple(args.allow_origin),
    )
    app = create_app(env_id, args.env_kwargs, config)
    tune_gc_for_serving()
    print(f"agentfly-serve: {env_id} on http://{args.host}:{args.port} (ws://.../ws)", file=sys.stderr, flush=True)
    make_server(app, config, host=args.host, port=args.port, log_level=args.log_level).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
