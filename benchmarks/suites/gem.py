"""``agentfly-bench --suite gem``: the env step side by side with GEM (``gem-llm``), the fastest peer.

Same reasoning-gym task (``chain_sum``), same episode loop (reset, then one correct answer), each
library used as its docs intend:

- **one env, sync**: ours through ``gym.make("AgentFly/Math-v0", dataset="chain_sum")`` and
  ``reset``/``step``; GEM's ``gem.make("rg:chain_sum")`` and ``reset``/``step``;
- **one env, async**: ours through ``areset``/``astep`` on one event loop; GEM has no async API, so its
  figure is its sync env's;
- **vector**: 64 envs, every env answering in each round and reset in the same call when its episode
  ends: our :class:`~agentfly_env.AgentVectorEnv` with ``autoreset=True``; GEM's ``make_vec``
  (``SyncVectorEnv``, which resets in the same step by default).

GEM pins reasoning-gym 0.1.23 (ours is 0.1.25), so it runs in its own venv, in a child process that
takes orders over a pipe (``_gem_peer.py``); the child is started once and its measurements
interleave with ours: each round measures every row on both sides, alternating which goes first.
A row's figure is the median over the rounds of episodes per second, each measured over a fixed time
(the action is built inside the timed loop, on both sides). One untimed round warms both up; then
both sides ``gc.freeze()`` what they hold, as long-running trainers do.

Where the tasks come from differs, and the figures include it: GEM generates a new reasoning-gym item
at every reset (about 8 µs for ``chain_sum``); Math-v0 draws from a split of 10,000 items whose
generated items are cached, shared by its envs, so once warm (the warm-up round covers most of the
split) it serves them without generating.

GEM's venv: ``make peers`` (``.venv-peers/gem`` with ``gem-llm==0.1.0``), or ``AGENTFLY_GEM_PYTHON``
set to a Python that has it. Without it, the suite reports our figures and says how to get GEM's.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import gymnasium as gym
from rich.console import Console
from rich.table import Table

import agentfly_env  # noqa: F401  (registers the ids)
from agentfly_bench.suites._peers import peer_python
from agentfly_env import AgentVectorEnv, run_sync

DESCRIPTION = "Math-v0 chain_sum episodes/s side by side with GEM (its own venv): one env sync, async, 64 vectorised"

TASK = "chain_sum"
ENV_ID = "AgentFly/Math-v0"
NUM_ENVS = 64
CHUNK = 256  # episodes between two looks at the clock (one env)
PEER_SCRIPT = Path(__file__).with_name("_gem_peer.py")
HOW_TO_GET_GEM = (
    "GEM's venv is missing: run `make peers` (creates .venv-peers/gem with gem-llm==0.1.0, which pins "
    "reasoning-gym 0.1.23), or set AGENTFLY_GEM_PYTHON to a Python that has gem-llm installed"
)
ROWS = {
    "sync": ("one env, sync", "gym.make + reset/step", "gem.make + reset/step"),
    "async": ("one env, async", "areset/astep on one loop", "no async API: its sync env"),
    "vector": (f"{NUM_ENVS} envs, vector", "AgentVectorEnv(autoreset)", "SyncVectorEnv (make_vec)"),
}


def gem_python() -> Path | None:
    """The Python of GEM's venv: ``AGENTFLY_GEM_PYTHON``, else ``.venv-peers/gem`` here or in the repo."""
    return peer_python("gem", "AGENTFLY_GEM_PYTHON")


class GemPeer:
    """GEM's side: a child process in GEM's venv that measures on request."""

    def __init__(self, python: Path) -> None:
        self._log = tempfile.TemporaryFile(mode="w+")
        self._process = subprocess.Popen(
            [str(python), "-u", str(PEER_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        self.versions: dict[str, str] = self._read()["versions"]

    def _read(self) -> dict[str, Any]:
        line = self._process.stdout.readline() if self._process.stdout else ""
        if not line:
            self._log.seek(0)
            raise RuntimeError(f"GEM's benchmark process ended early; its output:\n{self._log.read()[-4000:]}")
        return json.loads(line)

    def measure(self, mode: str, seconds: float, num_envs: int = NUM_ENVS) -> dict[str, Any]:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps({"mode": mode, "seconds": seconds, "num_envs": num_envs}) + "\n")
        self._process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self._process.poll() is None and self._process.stdin is not None:
            self._process.stdin.write(json.dumps({"mode": "quit"}) + "\n")
            self._process.stdin.close()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._log.close()


class Ours:
    """Our side, in this process."""

    def __init__(self) -> None:
        self.env = gym.make(ENV_ID, dataset=TASK)
        self.vec = AgentVectorEnv.make(ENV_ID, NUM_ENVS, autoreset=True, dataset=TASK)
        self.infos = self.vec.reset()[1]

    @staticmethod
    def action(info: dict[str, Any]) -> str:
        return f"<answer>{info['task']['answer']}</answer>"

    def sync(self, seconds: float) -> dict[str, Any]:
        env, action = self.env, self.action
        episodes, solved = 0, 0.0
        started = time.perf_counter()
        while True:
            for _ in range(CHUNK):
                _, info = env.reset()
                solved += env.step(action(info))[1]
            episodes += CHUNK
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                return _rate(episodes, elapsed, solved)

    def async_(self, seconds: float) -> dict[str, Any]:
        env, action = self.env.unwrapped, self.action

        async def loop() -> dict[str, Any]:
            episodes, solved = 0, 0.0
            started = time.perf_counter()
            while True:
                for _ in range(CHUNK):
                    _, info = await env.areset()
                    solved += (await env.astep(action(info)))[1]
                episodes += CHUNK
                elapsed = time.perf_counter() - started
                if elapsed >= seconds:
                    return _rate(episodes, elapsed, solved)

        return run_sync(loop())

    def vector(self, seconds: float) -> dict[str, Any]:
        vec, action = self.vec, self.action
        infos = self.infos
        episodes, solved = 0, 0.0
        started = time.perf_counter()
        while True:
            result = vec.step([action(info) for info in infos])
            infos = result.infos  # autoreset: the next episode's reset info
            solved += float(result.rewards.sum())
            episodes += NUM_ENVS
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                self.infos = infos
                return _rate(episodes, elapsed, solved)

    def close(self) -> None:
        self.env.close()
        self.vec.close()


def _rate(episodes: int, elapsed: float, solved: float) -> dict[str, Any]:
    return {
        "episodes": episodes,
        "elapsed_s": elapsed,
        "episodes_per_s": episodes / elapsed,
        "solved": solved / episodes,
    }


def run(quick: bool, *, rounds: int | None = None, seconds: float | None = None) -> dict[str, Any]:
    """Interleaved rounds of every row on both sides; the median of each row's episodes/s."""
    rounds = rounds or (3 if quick else 5)
    seconds = seconds or (0.05 if quick else 1.0)
    python = gem_python()
    peer = None
    gem_error = None
    if python is None:
        gem_error = HOW_TO_GET_GEM
    else:
        try:
            peer = GemPeer(python)
        except (OSError, RuntimeError, ValueError) as error:
            gem_error = f"GEM's benchmark process ({python}) failed to start: {error}"
    ours = Ours()
    samples: dict[str, dict[str, list[dict[str, Any]]]] = {row: {"agentfly": [], "gem": []} for row in ROWS}
    try:

        def measure_row(row: str, side: str, length: float) -> dict[str, Any] | None:
            if side == "agentfly":
                return {"sync": ours.sync, "async": ours.async_, "vector": ours.vector}[row](length)
            if peer is None:
                return None
            return peer.measure("vector" if row == "vector" else "sync", length)

        for row in ROWS:  # warm-up, not recorded
            for side in ("agentfly", "gem"):
                measure_row(row, side, min(seconds, 0.2))
        # As long-running trainers do (and agentfly-bench does at start): what is built and warm now
        # leaves the collector's reach, on both sides, so full collections do not rescan the envs.
        gc.collect()
        gc.freeze()
        if peer is not None:
            peer.measure("freeze", 0)
        for number in range(rounds):
            sides = ("agentfly", "gem") if number % 2 == 0 else ("gem", "agentfly")
            for row in ROWS:
                for side in sides:
                    if side == "gem" and row == "async":
                        continue  # GEM's async figure is its sync one, measured in the same round
                    sample = measure_row(row, side, seconds)
                    if sample is not None:
                        samples[row][side].append(sample)
            samples["async"]["gem"] = samples["sync"]["gem"]
    finally:
        ours.close()
        if peer is not None:
            peer.close()

    results: dict[str, Any] = {
        "config": {
            "task": TASK,
            "env_id": ENV_ID,
            "num_envs": NUM_ENVS,
            "rounds": rounds,
            "seconds_per_measurement": seconds,
            "agentfly": {"reasoning-gym": metadata.version("reasoning-gym"), "python": sys.version.split()[0]},
            "gem": peer.versions if peer is not None else None,
            "load_average": os.getloadavg()[0],
        },
        "gem_error": gem_error,
        "rows": {},
    }
    for row, (label, ours_how, gem_how) in ROWS.items():
        entry: dict[str, Any] = {"label": label, "agentfly_how": ours_how, "gem_how": gem_how}
        for side in ("agentfly", "gem"):
            rates = [sample["episodes_per_s"] for sample in samples[row][side]]
            entry[side] = statistics.median(rates) if rates else None
            entry[f"{side}_rounds"] = rates
            entry[f"{side}_solved"] = min((sample["solved"] for sample in samples[row][side]), default=None)
        entry["ratio"] = entry["agentfly"] / entry["gem"] if entry["gem"] else None
        results["rows"][row] = entry
    return results


def render(results: dict[str, Any], console: Console) -> None:
    config = results["config"]
    gem = config["gem"] or {}
    table = Table(
        title=f"reasoning-gym {config['task']}: episodes/s (reset + one correct answer), median of "
        f"{config['rounds']} interleaved rounds of {config['seconds_per_measurement']:g} s"
    )
    for column in ("mode", "agentfly", "GEM", "agentfly / GEM", "agentfly: how", "GEM: how"):
        table.add_column(column, justify="right" if column in ("agentfly", "GEM", "agentfly / GEM") else "left")
    for entry in results["rows"].values():
        table.add_row(
            entry["label"],
            f"{entry['agentfly']:,.0f}",
            f"{entry['gem']:,.0f}" if entry["gem"] else "-",
            f"{entry['ratio']:.2f}x" if entry["ratio"] else "-",
            entry["agentfly_how"],
            entry["gem_how"],
        )
    console.print(table)
    ours = config["agentfly"]
    console.print(
        f"agentfly: reasoning-gym {ours['reasoning-gym']}, Python {ours['python']}; "
        + (
            f"GEM: gem-llm {gem['gem-llm']}, reasoning-gym {gem['reasoning-gym']}, Python {gem['python']} (own venv); "
            if gem
            else ""
        )
        + f"load average {config['load_average']:.2f}"
    )
    console.print(
        "tasks: GEM generates an item at every reset; Math-v0 serves a 10,000-item split from its shared cache "
        "of generated items (warm after the warm-up round)"
    )
    if results["gem_error"]:
        console.print(f"[yellow]{results['gem_error']}[/yellow]")
