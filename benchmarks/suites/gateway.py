"""``agentfly-bench --suite gateway``: the latency the OpenAI-compatible gateway adds to each model call.

The gateway (:mod:`agentfly_train.gateway`) serves SmolLM2's real tokenizer and chat template; the
model is an instant generator that answers each call with fixed tokens (a hermes tool call, or a short
answer on an episode's last call), so what is timed is the gateway's own work: HTTP, JSON, rendering
the conversation with the template, recording the rows, scheduling. Agent programs are played by
concurrent ``httpx`` clients in a process of their own (so they do not share the gateway's interpreter
lock), over HTTP on 127.0.0.1. Each episode is a calculator program: ask, get a tool call, send the
tool's result back, and so on until the answer, so every call's prompt is the previous one grown. At
each concurrency, episodes are played in rounds of that many at once (the episodes of a round are
open together, as a GRPO group's are), after one round of warm-up.

Per concurrency and generator kind:

- **gateway, as it counts itself**: :attr:`~agentfly_train.gateway.EpisodeCounters.added_latency_s`
  (the time in its route outside the generator: request body, rendering, recording, the answer's
  message; not HTTP parsing, routing, or serializing the response);
- **gateway, as a client sees it**: each call's round trip minus the generator's time for that call
  (the client's seed names the call to the generator), so HTTP and JSON at both ends, and the wait
  for a batch, count too; calls/s; the CPU time per call of this process (the gateway's thread) and
  of the programs' (which side is the bottleneck at high concurrency);
- **direct**: the same prompts (the gateway's recorded ones) sent by as many concurrent coroutines
  to the generator as the trainer's own rollout sends them, through a
  :class:`~agentfly_train.generation.scheduler.GenerationScheduler` in this process: per-call time
  minus the generator's, and calls/s; the ratio is direct calls/s over the gateway's.

Generator kinds: ``async`` (an engine that takes each call as it comes, as async vLLM does: the
scheduler passes calls straight through) and ``sync`` (one that takes batches, as transformers and
in-process vLLM do: the scheduler batches calls, starting a batch when every open episode is waiting
or after ``batch_wait_s``). The issue's target (issue 24): at most 2 ms added per call at p50, at
1 and 64 concurrent episodes.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import statistics
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from agentfly_train.gateway import BackgroundGateway, Gateway, GatewaySettings
from agentfly_train.generation import Generation, GenerationRequest, SamplingParams
from agentfly_train.generation.scheduler import GenerationScheduler
from agentfly_train.models import load_tokenizer, resolve_model_path

DESCRIPTION = "the OpenAI-compatible gateway's added latency per call vs the generator directly (1 and 64 episodes)"

TARGET_P50_S = 0.002
SYSTEM_PROMPT = (
    "You are a careful calculator agent. Work out the user's arithmetic with the multiply tool, one "
    "product at a time, and give the final number in your answer."
)
MULTIPLY = {
    "type": "function",
    "function": {
        "name": "multiply",
        "description": "Multiply two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
TOOL_CALL_TEXT = '<tool_call>\n{"name": "multiply", "arguments": {"a": 123, "b": 456}}\n</tool_call>'
ANSWER_TEXT = "123 times 456 is 56088."
CALLS_PER_SEED = 64  # a seed is episode * CALLS_PER_SEED + call: it tells the generator which call it answers
DIRECT_SEEDS = 1 << 40  # the direct baseline's seeds start here, apart from the gateway's


# ---------------------------------------------------------------------------------------- the generator


class InstantGenerator:
    """Answers at once with fixed tokens: a tool call, or the answer on an episode's last call (read from
    the request's seed); keeps the seconds each call spent in it, by seed."""

    def __init__(self, tokenizer: Any, calls_per_episode: int) -> None:
        end = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
        self.tool_call = tokenizer(TOOL_CALL_TEXT, add_special_tokens=False)["input_ids"] + end
        self.answer = tokenizer(ANSWER_TEXT, add_special_tokens=False)["input_ids"] + end
        self.calls_per_episode = calls_per_episode
        self.seconds: dict[int, float] = {}

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams) -> list[Generation]:
        started = time.perf_counter()
        out = [self._answer(request) for request in requests]
        elapsed = time.perf_counter() - started
        for request in requests:
            self.seconds[request.seed] = elapsed
        return out

    def _answer(self, request: GenerationRequest) -> Generation:
        last = request.seed % CALLS_PER_SEED == self.calls_per_episode - 1
        tokens = list(self.answer if last else self.tool_call)
        return Generation(tokens, [-0.5] * len(tokens), "stop")


class InstantAsyncGenerator(InstantGenerator):
    """:class:`InstantGenerator` that also takes calls one at a time (an async engine's interface)."""

    async def agenerate(self, request: GenerationRequest, params: SamplingParams) -> Generation:
        return self.generate([request], params)[0]


GENERATORS = {"async": InstantAsyncGenerator, "sync": InstantGenerator}


# ---------------------------------------------------------------------------------------- the programs


class Programs:
    """The agent programs, in a process of their own: :meth:`play` has them play a round of episodes.

    Example:
        >>> with Programs(calls_per_episode=3) as programs:  # doctest: +SKIP
        ...     played = programs.play([(episode.base_url, 0)])
    """

    def __init__(self, calls_per_episode: int) -> None:
        context = multiprocessing.get_context("spawn")  # the gateway's thread must not be forked
        self.connection, theirs = context.Pipe()
        self.process = context.Process(target=_client_process, args=(theirs, calls_per_episode), daemon=True)

    def __enter__(self) -> Programs:
        self.process.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process.is_alive():
            self.connection.send(None)
            self.process.join(30)
        if self.process.is_alive():
            self.process.kill()

    def play(self, episodes: list[tuple[str, int]]) -> dict[str, Any]:
        """Play ``(base URL, first seed)`` episodes at once: each call's ``(seed, seconds)``, errors, the wall
        time, and the CPU time the programs' process spent."""
        self.connection.send(episodes)
        while not self.connection.poll(1.0):
            if not self.process.is_alive():
                raise RuntimeError(f"the programs' process exited with code {self.process.exitcode}")
        return self.connection.recv()


def _client_process(connection: Connection, calls_per_episode: int) -> None:
    """The programs' process: plays each round it is sent, answers with each call's timing."""
    asyncio.run(_serve_rounds(connection, calls_per_episode))


async def _serve_rounds(connection: Connection, calls_per_episode: int) -> None:
    import httpx

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(limits=limits, timeout=60.0) as client:
        while (episodes := await asyncio.to_thread(connection.recv)) is not None:
            started, cpu = time.perf_counter(), time.process_time()
            played = await asyncio.gather(
                *(_episode(client, url, seed, calls_per_episode) for url, seed in episodes), return_exceptions=True
            )
            wall = time.perf_counter() - started
            errors = [f"{type(error).__name__}: {error}" for error in played if isinstance(error, BaseException)]
            calls = [call for result in played if not isinstance(result, BaseException) for call in result]
            cpu = time.process_time() - cpu
            connection.send({"calls": calls, "errors": errors, "wall_s": wall, "cpu_s": cpu})


async def _episode(client: Any, base_url: str, seed: int, calls: int) -> list[tuple[int, float]]:
    """A calculator program: call the model, run each tool call it makes, until it answers; returns
    ``(seed, round trip seconds)`` per call."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "What is 123 * 456?"},
    ]
    timings = []
    for call in range(calls):
        body = {"model": "policy", "messages": messages, "tools": [MULTIPLY], "seed": seed + call}
        started = time.perf_counter()
        response = await client.post(f"{base_url}/chat/completions", json=body)
        timings.append((seed + call, time.perf_counter() - started))
        response.raise_for_status()
        message = response.json()["choices"][0]["message"]
        messages.append(message)
        for tool_call in message.get("tool_calls") or []:
            arguments = json.loads(tool_call["function"]["arguments"])
            messages.append(
                {"role": "tool", "tool_call_id": tool_call["id"], "content": str(arguments["a"] * arguments["b"])}
            )
    if messages[-1].get("content") != ANSWER_TEXT:
        raise RuntimeError(f"the episode did not end with the answer: {messages[-1]}")
    return timings


# ---------------------------------------------------------------------------------------- one measurement


def _through_gateway(
    gateway: Gateway, generator: InstantGenerator, programs: Programs, concurrency: int, rounds: int
) -> dict[str, Any]:
    """Play ``rounds`` rounds of ``concurrency`` episodes (plus one of warm-up) through the gateway."""
    counted: list[float] = []
    client_added: list[float] = []
    prompts: list[list[list[int]]] = []
    rows: list[int] = []
    mismatches = 0
    errors: list[str] = []
    wall = gateway_cpu = programs_cpu = 0.0
    with BackgroundGateway(gateway) as running:
        for round_index in range(rounds + 1):
            episodes = [running.open_episode() for _ in range(concurrency)]
            seeds = [(round_index * concurrency + i) * CALLS_PER_SEED for i in range(concurrency)]
            cpu = time.process_time()
            played = programs.play([(episode.base_url, seed) for episode, seed in zip(episodes, seeds, strict=True)])
            cpu = time.process_time() - cpu  # this process: the gateway's thread (the main one waits)
            recordings = [running.close_episode(episode.key) for episode in episodes]
            if round_index == 0:
                continue  # warm-up: connections, the template's compiled form, caches
            wall += played["wall_s"]
            gateway_cpu += cpu
            programs_cpu += played["cpu_s"]
            errors += played["errors"]
            client_added += [seconds - generator.seconds[seed] for seed, seconds in played["calls"]]
            for recording in recordings:
                counted += recording.counters.added_latency_s
                rows.append(recording.counters.rows)
                mismatches += recording.counters.prefix_mismatches
                prompts.append([row.token_ids[:end] for row in recording.rows for end, _ in row.calls])
    return {
        "calls": len(client_added),
        "calls_per_s": len(client_added) / wall if wall else 0.0,
        "cpu_ms_per_call": {
            "gateway": gateway_cpu * 1000 / max(1, len(client_added)),
            "programs": programs_cpu * 1000 / max(1, len(client_added)),
        },
        "counted": _percentiles(counted),
        "client": _percentiles(client_added),
        "rows_per_episode": statistics.mean(rows) if rows else 0.0,
        "prefix_mismatches": mismatches,
        "errors": errors[:5],
        "failed_episodes": len(errors),
        "prompts": prompts,
    }


async def _direct(
    generator: InstantGenerator, settings: GatewaySettings, prompts: list[list[list[int]]], concurrency: int
) -> dict[str, Any]:
    """The same prompts, ``concurrency`` episodes at a time, to the generator through a scheduler, as the
    trainer's rollout sends them."""
    scheduler = GenerationScheduler(
        generator, batch_wait_s=settings.batch_wait_s, max_batch_size=settings.max_batch_size
    )
    params = SamplingParams(max_new_tokens=settings.sampling.max_new_tokens)
    added: list[float] = []

    async def episode(index: int, calls: list[list[int]]) -> None:
        scheduler.join()
        try:
            for call, prompt in enumerate(calls):
                seed = DIRECT_SEEDS + index * CALLS_PER_SEED + call
                started = time.perf_counter()
                await scheduler.generate(GenerationRequest(prompt, params.max_new_tokens, seed), params)
                added.append(time.perf_counter() - started - generator.seconds[seed])
        finally:
            scheduler.leave()

    wall = 0.0
    async with scheduler.running():
        for start in range(0, len(prompts), concurrency):
            started = time.perf_counter()
            await asyncio.gather(
                *(episode(start + i, calls) for i, calls in enumerate(prompts[start : start + concurrency]))
            )
            wall += time.perf_counter() - started
    return {"calls": len(added), "calls_per_s": len(added) / wall if wall else 0.0, "added": _percentiles(added)}


def _percentiles(seconds: list[float]) -> dict[str, float]:
    if not seconds:
        return {"n": 0, "p50_s": 0.0, "p99_s": 0.0, "mean_s": 0.0}
    p50, p99 = np.percentile(seconds, [50, 99])
    return {"n": len(seconds), "p50_s": float(p50), "p99_s": float(p99), "mean_s": float(np.mean(seconds))}


def _loadavg() -> list[float]:
    """The machine's 1, 5 and 15-minute load averages (the other jobs sharing its cores)."""
    return [float(value) for value in Path("/proc/loadavg").read_text().split()[:3]]


# ---------------------------------------------------------------------------------------- the suite


def run(
    quick: bool,
    *,
    concurrency: list[int] | None = None,
    episodes: int | None = None,
    calls_per_episode: int = 3,
    generators: list[str] | None = None,
    model: str = "smollm2-135m",
) -> dict[str, Any]:
    """Measure each generator kind at each concurrency: through the gateway, then directly.

    Args:
        quick: A smoke run: few episodes.
        concurrency: Episodes played at once (default 1 and 64).
        episodes: Episodes per measurement, rounded up to whole rounds (default 256, quick 8).
        calls_per_episode: Model calls per episode: tool calls, then the answer (at least 1).
        generators: Generator kinds, of :data:`GENERATORS` (default both).
        model: The model whose tokenizer and chat template are served (a path, or the bundled SmolLM2).
    """
    concurrency = concurrency or [1, 64]
    episodes = episodes or (8 if quick else 256)
    generators = generators or list(GENERATORS)
    if not 1 <= calls_per_episode < CALLS_PER_SEED:
        raise ValueError(f"calls_per_episode must be from 1 to {CALLS_PER_SEED - 1}, not {calls_per_episode}")
    unknown = sorted(set(generators) - set(GENERATORS))
    if unknown:
        raise ValueError(f"unknown generator kinds {unknown}; known: {sorted(GENERATORS)}")
    tokenizer = load_tokenizer(resolve_model_path(model))
    results: dict[str, Any] = {
        "config": {
            "model": model,
            "concurrency": concurrency,
            "episodes": episodes,
            "calls_per_episode": calls_per_episode,
            "generators": generators,
            "target_p50_s": TARGET_P50_S,
            "cores": multiprocessing.cpu_count(),
        },
        "load_before": _loadavg(),
        "rows": [],
    }
    with Programs(calls_per_episode) as programs:
        for kind in generators:
            for level in concurrency:
                generator = GENERATORS[kind](tokenizer, calls_per_episode)
                gateway = Gateway(generator, tokenizer)
                rounds = -(-episodes // level)
                through = _through_gateway(gateway, generator, programs, level, rounds)
                direct = asyncio.run(_direct(generator, gateway.settings, through.pop("prompts"), level))
                results["rows"].append(
                    {
                        "generator": kind,
                        "concurrency": level,
                        "episodes": rounds * level,
                        "gateway": through,
                        "direct": direct,
                        "ratio": direct["calls_per_s"] / through["calls_per_s"] if through["calls_per_s"] else None,
                        "meets_target": {
                            measure: through[measure]["p50_s"] <= TARGET_P50_S for measure in ("counted", "client")
                        },
                    }
                )
    results["load_after"] = _loadavg()
    return results


def render(results: dict[str, Any], console: Console) -> None:
    config = results["config"]
    table = Table(
        title=f"Gateway: added latency per call in ms, p50 / p99 (target p50 <= {config['target_p50_s'] * 1000:g} ms)",
        caption=f"{results['rows'][0]['gateway']['calls'] if results['rows'] else 0:,} calls per row: "
        f"{config['calls_per_episode']}-call tool episodes, {Path(config['model']).name}'s template, an "
        "instant generator (async: calls go straight in; sync: the scheduler batches them). counts: the gateway's own count; sees: a client's round trip minus the generator's "
        f"time; direct: the same prompts to the generator in process. {config['cores']} cores, load "
        f"{_load(results['load_before'])} before, {_load(results['load_after'])} after",
    )
    columns = ["", "at once", "gateway\ncounts", "client\nsees", "calls/s", "direct"]
    columns += ["direct\ncalls/s", "direct /\ngateway", "CPU ms/call\ngw/programs", "target\ncounts / sees"]
    for column in columns:
        table.add_column(column, justify="right" if column else "left")
    for row in results["rows"]:
        gateway, direct = row["gateway"], row["direct"]
        table.add_row(
            row["generator"],
            str(row["concurrency"]),
            _ms(gateway["counted"]),
            _ms(gateway["client"]),
            f"{gateway['calls_per_s']:,.0f}",
            _ms(direct["added"]),
            f"{direct['calls_per_s']:,.0f}",
            f"{row['ratio']:,.0f}x" if row["ratio"] else "-",
            "/".join(f"{gateway['cpu_ms_per_call'][side]:.2f}" for side in ("gateway", "programs")),
            "/".join("yes" if met else "[red]no[/red]" for met in row["meets_target"].values()),
        )
    console.print(table)
    for row in results["rows"]:
        gateway, name = row["gateway"], f"{row['generator']} x{row['concurrency']}"
        if gateway["rows_per_episode"] != 1 or gateway["prefix_mismatches"]:
            console.print(
                f"[yellow]{name}: {gateway['rows_per_episode']:.2f} rows per episode, "
                f"{gateway['prefix_mismatches']} prefix mismatches (each episode should be one row)[/yellow]"
            )
        if gateway["failed_episodes"]:
            console.print(f"[yellow]{name}: {gateway['failed_episodes']} episodes failed[/yellow]")
        for error in gateway["errors"]:
            console.print(f"[yellow]{name}: {error}[/yellow]")


def _ms(stats: dict[str, float]) -> str:
    return "/".join(_short(stats[key] * 1000) for key in ("p50_s", "p99_s"))


def _short(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:,.0f}"


def _load(values: list[float]) -> str:
    return "/".join(f"{value:.1f}" for value in values)
