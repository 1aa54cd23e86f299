"""The OpenEnv reference server, run in openenv's own venv: the ``openenv`` package's ``create_app``
serving a sleeping echo env, under uvicorn as OpenEnv's docs run it (one worker).

Usage: python _openenv_peer.py --wait SECONDS --max-sessions N
Prints ``PORT <n>`` once it listens (a free loopback port), then serves until killed.

The env is OpenEnv's idiom for a text env (an ``Action`` with ``message``, an ``Observation`` with
``text``), and its best case for density: ``step_async`` sleeps on the event loop (no thread held),
each step echoes the message with reward 1.0, and ``"bye"`` ends the episode. Imports only openenv
(and what it brings), never this project.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from typing import Any


def build_app(wait: float, max_sessions: int) -> Any:
    """openenv's app serving the sleeping echo env (openenv is imported here: this module also imports
    without it, as the docs test does)."""
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    class SleepAction(Action):
        message: str = ""

    class SleepObservation(Observation):
        text: str = ""

    class SleepEnv(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self._state = State()

        def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> SleepObservation:
            self._state = State(episode_id=episode_id or uuid.uuid4().hex, step_count=0)
            return SleepObservation(text="Say something.")

        def _answer(self, action: SleepAction) -> SleepObservation:
            self._state.step_count += 1
            return SleepObservation(text=f"You said: {action.message}", reward=1.0, done=action.message == "bye")

        def step(self, action: SleepAction, timeout_s: float | None = None, **kwargs: Any) -> SleepObservation:
            time.sleep(wait)
            return self._answer(action)

        async def step_async(
            self, action: SleepAction, timeout_s: float | None = None, **kwargs: Any
        ) -> SleepObservation:
            await asyncio.sleep(wait)
            return self._answer(action)

        @property
        def state(self) -> State:
            return self._state

    return create_app(SleepEnv, SleepAction, SleepObservation, env_name="sleep", max_concurrent_envs=max_sessions)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--wait", type=float, default=1.0)
    parser.add_argument("--max-sessions", type=int, default=4096)
    args = parser.parse_args()
    import uvicorn

    app = build_app(args.wait, args.max_sessions)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", backlog=4096))

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                await task  # raises why it could not start
            await asyncio.sleep(0.02)
        print(f"PORT {server.servers[0].sockets[0].getsockname()[1]}", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
