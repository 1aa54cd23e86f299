"""``agentfly-bench --suite alfworld``: the pooled TextWorld engines of AgentFly/ALFWorld-v0.

- **generation**: drawing a game in memory, making one (ALFWorld's handcoded expert plays each draw
  until one is won) and writing it to the cache, finding it there again.
- **engine**: starting a worker process, its memory, loading a game (the PDDL translation) and
  restarting the loaded game.
- **steps/s per engine**: the same seeded random walks over admissible commands through our worker
  (``Engine.step``: a round trip to the process, TextWorld with its caches) and, in the same call,
  through stock TextWorld as ALFWorld runs it (``PddlEnv`` in this process); then through the whole
  env (tool-call parsing, the ``act`` tool, the reward).
- **pool**: steps/s of N engines driven at once, N = 1, 2, 4.
- **planner**: the Fast Downward plan that the expert falls back on off its walkthrough (a blind
  search: quick in small rooms, up to a minute in large kitchens; searches past 20 s are stopped).
"""

from __future__ import annotations

import json
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from agentfly_bench.measure import memory_mib, summarize
from agentfly_env import run_sync
from agentfly_env.resources.pool import ResourceManager
from agentfly_envs.alfworld import (
    ENGINE_POOL,
    ALFWorldEnv,
    Engine,
    EngineError,
    GeneratedGames,
)
from agentfly_envs.alfworld.generator import TASK_TYPES, draw_game

DESCRIPTION = "ALFWorld-v0: game generation, engine start/memory/load, steps/s per engine vs stock TextWorld, pools of 1/2/4, planner"


def random_walk(step: Callable[[str], list[str]], admissible: list[str], steps: int, seed: int) -> list[float]:
    """Play ``steps`` seeded random admissible commands (``step`` returns the next admissible list)."""
    rng = random.Random(seed)
    samples = []
    for _ in range(steps):
        command = rng.choice(admissible)
        started = time.perf_counter()
        admissible = step(command)
        samples.append(time.perf_counter() - started)
    return samples


def steps_per_second(samples: list[float]) -> float:
    return len(samples) / sum(samples) if samples else 0.0


def bench_generation(games: GeneratedGames, count: int) -> dict[str, Any]:
    made, written, found = [], [], []
    for index in range(count):
        started = time.perf_counter()
        draw_game(games.game_seed(index), TASK_TYPES[index % len(TASK_TYPES)], scenes=games.scenes)
        made.append(time.perf_counter() - started)
    for index in range(count):
        started = time.perf_counter()
        games[index]
        written.append(time.perf_counter() - started)
    again = GeneratedGames(games.split, cache_dir=games.root)
    for index in range(count):
        started = time.perf_counter()
        again[index]
        found.append(time.perf_counter() - started)
    return {"generate": summarize(made), "generate_and_write": summarize(written), "found_in_cache": summarize(found)}


def bench_engine(game_files: list[str], starts: int) -> dict[str, Any]:
    start_times, memory = [], []
    for _ in range(starts):
        started = time.perf_counter()
        engine = Engine.start()
        start_times.append(time.perf_counter() - started)
        memory.append(memory_mib(engine.pid)["self_mib"])
        engine.close()
    loads, resets = [], []
    engine = Engine.start()
    try:
        for game_file in game_files:
            started = time.perf_counter()
            engine.load(game_file)
            loads.append(time.perf_counter() - started)
            started = time.perf_counter()
            engine.load(game_file)
            resets.append(time.perf_counter() - started)
        loaded_mib = memory_mib(engine.pid)["self_mib"]
    finally:
        engine.close()
    return {
        "start": summarize(start_times),
        "memory_mib": statistics.mean(memory),
        "memory_after_loads_mib": loaded_mib,
        "first_load": summarize(loads),
        "reset": summarize(resets),
    }


def bench_steps(games: GeneratedGames, count: int, steps: int, stock_steps: int) -> dict[str, Any]:
    """Ours and stock TextWorld on the same walks of the same games, then the whole env."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
    from textworld.envs import PddlEnv

    ours, ours_short, stock = [], [], []
    engine = Engine.start()
    try:
        for index in range(count):
            game_file = games[index]["game_file"]
            ours += random_walk(
                lambda c: engine.step(c).admissible_commands, engine.load(game_file).admissible_commands, steps, index
            )
            first = engine.load(game_file).admissible_commands
            ours_short += random_walk(lambda c: engine.step(c).admissible_commands, first, stock_steps, index)
            baseline = AlfredDemangler(PddlEnv(textworld.EnvInfos(won=True, admissible_commands=True)))
            baseline.load(game_file)
            first = baseline.reset()["admissible_commands"]
            stock += random_walk(
                lambda c, env=baseline: env.step(c)[0]["admissible_commands"], first, stock_steps, index
            )
    finally:
        engine.close()

    manager = ResourceManager({ENGINE_POOL: {"size": 1}})
    env = ALFWorldEnv(games.split, cache_dir=games.root, resources=manager, max_turns=10**9)
    through_env: list[float] = []
    try:
        for index in range(count):
            _, info = env.reset(options={"task_index": index})

            def step(command: str) -> list[str]:
                call = json.dumps({"name": "act", "arguments": {"command": command}})
                return env.step(f"<tool_call>{call}</tool_call>")[4]["admissible_commands"]

            through_env += random_walk(step, info["admissible_commands"], steps, index)
    finally:
        env.close()
        run_sync(manager.close())
    rates = {
        "ours_engine": steps_per_second(ours),
        "ours_engine_same_walks": steps_per_second(ours_short),
        "stock_textworld": steps_per_second(stock),
        "ours_env": steps_per_second(through_env),
    }
    return {
        "steps_per_s": rates,
        "ratio_vs_stock": rates["ours_engine_same_walks"] / rates["stock_textworld"],
        "latency": {
            "ours_engine": summarize(ours),
            "stock_textworld": summarize(stock),
            "ours_env": summarize(through_env),
        },
    }


def bench_pool(games: GeneratedGames, sizes: list[int], steps: int) -> dict[str, Any]:
    """Total steps/s of N engines, each in a thread of its own walking its own game."""
    results = {}
    for size in sizes:
        engines = [Engine.start() for _ in range(size)]
        try:
            firsts = [
                engine.load(games[index]["game_file"]).admissible_commands for index, engine in enumerate(engines)
            ]
            threads = [
                threading.Thread(
                    target=random_walk, args=(lambda c, e=engine: e.step(c).admissible_commands, first, steps, index)
                )
                for index, (engine, first) in enumerate(zip(engines, firsts, strict=True))
            ]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - started
        finally:
            for engine in engines:
                engine.close()
        results[str(size)] = {"steps_per_s": size * steps / elapsed, "per_engine": steps / elapsed}
    return results


def bench_planner(games: GeneratedGames, count: int, timeout_s: float) -> dict[str, Any]:
    """Plan from the start of each game; a search that runs past ``timeout_s`` is stopped and counted."""
    samples, lengths, timeouts = [], [], 0
    engine = Engine.start()
    try:
        for index in range(count):
            engine.load(games[index]["game_file"])
            started = time.perf_counter()
            try:
                lengths.append(len(engine.plan(timeout_s=timeout_s)))
            except EngineError:
                timeouts += 1
                engine = Engine.start()
                continue
            samples.append(time.perf_counter() - started)
    finally:
        engine.close()
    return {
        "plan": summarize(samples),
        "timeouts": timeouts,
        "timeout_s": timeout_s,
        "mean_plan_length": statistics.mean(lengths or [0]),
    }


def run(quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentfly-alfworld-bench-") as cache_dir:
        games = GeneratedGames("train", cache_dir=cache_dir)
        count = 6 if quick else 24
        return {
            "generation": bench_generation(games, 12 if quick else 120),
            "engine": bench_engine([games[i]["game_file"] for i in range(count)], 1 if quick else 3),
            "steps": bench_steps(games, 3 if quick else 6, 30 if quick else 200, 10 if quick else 30),
            "pool": bench_pool(games, [1, 2, 4], 40 if quick else 200),
            "planner": bench_planner(games, 6 if quick else 12, 20.0),
        }


def _ms(stats: dict[str, float], key: str = "p50_us") -> str:
    return f"{stats[key] / 1000:.1f}"


def render(results: dict[str, Any], console: Console) -> None:
    table = Table(title="ALFWorld-v0: latency (ms)")
    for column in ("measure", "p50", "p90", "p99", "n"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    rows = {
        "draw a game (in memory, before the expert's check)": results["generation"]["generate"],
        "generate it (expert's check included) and write it": results["generation"]["generate_and_write"],
        "find it in the cache": results["generation"]["found_in_cache"],
        "start an engine process": results["engine"]["start"],
        "load a game (first time)": results["engine"]["first_load"],
        "restart the loaded game": results["engine"]["reset"],
        "step: our engine": results["steps"]["latency"]["ours_engine"],
        "step: stock TextWorld": results["steps"]["latency"]["stock_textworld"],
        "step: the whole env": results["steps"]["latency"]["ours_env"],
        "planner (expert off its walkthrough)": results["planner"]["plan"],
    }
    for name, stats in rows.items():
        if stats["n"]:
            table.add_row(name, _ms(stats), _ms(stats, "p90_us"), _ms(stats, "p99_us"), str(stats["n"]))
    console.print(table)
    rates = results["steps"]["steps_per_s"]
    console.print(
        f"steps/s per engine: ours {rates['ours_engine']:,.0f} (same walks: {rates['ours_engine_same_walks']:,.0f}), "
        f"stock TextWorld {rates['stock_textworld']:,.1f} -> {results['steps']['ratio_vs_stock']:.0f}x; "
        f"through the env {rates['ours_env']:,.0f}"
    )
    table = Table(title="ALFWorld-v0: N engines driven at once")
    for column in ("engines", "steps/s", "per engine"):
        table.add_column(column, justify="right")
    for size, row in results["pool"].items():
        table.add_row(size, f"{row['steps_per_s']:,.0f}", f"{row['per_engine']:,.0f}")
    console.print(table)
    engine = results["engine"]
    console.print(
        f"engine memory: {engine['memory_mib']:.0f} MiB started, {engine['memory_after_loads_mib']:.0f} MiB after "
        f"{engine['first_load']['n']} games"
    )
    planner = results["planner"]
    console.print(
        f"planner: {planner['plan']['n']} plans (mean length {planner['mean_plan_length']:.1f}), "
        f"{planner['timeouts']} searches stopped at {planner['timeout_s']:g} s"
    )
