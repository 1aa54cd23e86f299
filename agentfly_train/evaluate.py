"""``agentfly-train eval``: play a model on an env's eval split and report how it does.

The model is local (transformers, through the same token-faithful rollout the trainer uses) or any
OpenAI-compatible server (``eval.base_url``: a vLLM server on a GPU box), so a baseline measured before
training and the result after are comparable. The report has the success rate, the mean reward,
turns, tool calls and errors per episode and truncations (and each env's own numbers in a mixed run,
``env.mix``); trajectories go to
``{out_dir}/eval/trajectories.jsonl`` and the report to ``{out_dir}/eval/summary.json``.

Example:
    >>> config = Config.from_dict({"eval": {"base_url": "http://gpu-box:8000/v1", "episodes": 200}})
    >>> summary = evaluate(config)  # doctest: +SKIP
    >>> summary["success_rate"]  # doctest: +SKIP
    0.31
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from agentfly_env.core.aio import run_sync
from agentfly_env.core.env import AgentEnv
from agentfly_env.core.recording import TrajectoryWriter
from agentfly_env.resources.distributed import EnvHandle
from agentfly_env.resources.pool import ResourcePool
from agentfly_train.chat import first_messages
from agentfly_train.config import Config, ConfigError
from agentfly_train.generation import Generator
from agentfly_train.generation.openai import OpenAIChatClient
from agentfly_train.metrics import episode_metrics, gateway_metrics, per_env_metrics, sequence_metrics
from agentfly_train.rollout import Episode, EpisodeStats, reset_episode, run_env_pool, step_episode
from agentfly_train.run_files import EVAL_DIR, SUMMARY_FILE, TOKENS_FILE, TRAJECTORIES_FILE
from agentfly_train.tokens_log import write_token_log


def evaluate(
    config: Config,
    *,
    model: Any = None,
    tokenizer: Any = None,
    env_fn: Callable[[], AgentEnv] | None = None,
    client: OpenAIChatClient | None = None,
    generator: Generator | None = None,
) -> dict[str, Any]:
    """Play ``eval.episodes`` episodes (env seeds 0, 1, ...) on the eval options and summarise them.

    Args:
        config: The run; ``eval`` says how, ``env.eval_options`` are merged over ``env.options``.
        model: A local policy to evaluate instead of loading ``model.path``.
        tokenizer: Its tokenizer.
        env_fn: Builds one env instead of ``gym.make``.
        client: A server client instead of one built from ``eval.base_url``.
        generator: What samples for ``model`` (a trainer's, kept in sync with it) instead of a new one.
    """
    config.validate(check_env=env_fn is None, check_model=model is None and client is None, training=False)
    if config.agent.plays and (client is not None or config.eval.base_url):
        raise ConfigError(
            "an agent program is evaluated on the local model (the gateway records its calls), not a server"
        )
    options = {**config.env.options, **config.env.eval_options}
    seeds = list(range(config.eval.episodes))
    size = min(config.eval.concurrency, len(seeds))
    envs = run_env_pool(config, size, env_fn=env_fn, options=options)
    started = time.perf_counter()
    if client is None and config.eval.base_url:
        api_key = os.environ.get(config.eval.api_key_env) if config.eval.api_key_env else None
        client = OpenAIChatClient(
            config.eval.base_url,
            config.eval.server_model or config.model.path,
            api_key=api_key,
            timeout_s=config.eval.timeout_s,
        )
    try:
        if client is not None:
            episodes: list[EpisodeStats] = run_sync(_served_episodes(config, client, envs, seeds))
            source = f"{client.model} at {client.url}"
            metrics = episode_metrics(episodes)
        else:
            local, tokenizer = _local_episodes(config, model, tokenizer, envs, seeds, generator)
            episodes = list(local)
            metrics = {**episode_metrics(local), **sequence_metrics(local), **gateway_metrics(local)}
            source = config.model.path if model is None else type(model).__name__
        if config.env.mix:
            metrics.update(per_env_metrics(episodes))
    finally:
        run_sync(envs.close())
    out = Path(config.out_dir) / EVAL_DIR
    out.mkdir(parents=True, exist_ok=True)
    with TrajectoryWriter(out / TRAJECTORIES_FILE, durable=False) as writer:
        for episode in episodes:
            if (trajectory := episode.written()) is not None:
                writer.write(trajectory)
    if client is None:  # played as tokens here: what the model generated, for agentfly-view
        write_token_log(out / TOKENS_FILE, local, tokenizer)
    summary: dict[str, Any] = {
        "model": source,
        "env": config.env.id,
        "env_options": options,
        "temperature": config.eval.temperature,
        **metrics,
        "wall_s": time.perf_counter() - started,
        "trajectories": str(out / TRAJECTORIES_FILE),
    }
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2))
    summary["summary_file"] = str(out / SUMMARY_FILE)
    return summary


def _local_episodes(
    config: Config,
    model: Any,
    tokenizer: Any,
    envs: ResourcePool[EnvHandle],
    seeds: list[int],
    generator: Generator | None = None,
) -> tuple[list[Episode], Any]:
    """The episodes played locally, and the tokenizer (the one loaded here when no model was given)."""
    from agentfly_train.generation import build_generator
    from agentfly_train.lifecycle import load_policy, make_rollout

    model, tokenizer = load_policy(config, model, tokenizer)
    rollout_config = msgspec.structs.replace(config.rollout, samples_per_prompt=1)
    owned = generator is None  # built here, so closed here
    if generator is None:
        generator = build_generator(config, model, tokenizer)
    rollout = make_rollout(config, envs, generator, tokenizer, rollout_config, temperature=config.eval.temperature)
    episodes: list[Episode] = []
    try:
        for start in range(0, len(seeds), envs.config.size):
            chunk = seeds[start : start + envs.config.size]
            result = rollout.run(chunk, sample_seed=config.seed, episode_id_prefix=f"eval-{start}-")
            for episode in result.episodes:
                episode.group += start
            episodes += result.episodes
    finally:
        if owned and hasattr(generator, "close"):
            generator.close()
    return episodes, tokenizer


async def _served_episodes(
    config: Config, client: OpenAIChatClient, envs: ResourcePool[EnvHandle], seeds: list[int]
) -> list[EpisodeStats]:
    async def play(seed: int) -> EpisodeStats:
        lease = await envs.acquire(timeout=None)
        episode = EpisodeStats()
        try:
            await _play_served(config, client, lease.resource, seed, episode)
        finally:
            await lease.release(broken=episode.failure is not None or not episode.done)
        return episode

    return list(await asyncio.gather(*(play(seed) for seed in seeds)))


async def _play_served(
    config: Config, client: OpenAIChatClient, env: EnvHandle, seed: int, episode: EpisodeStats
) -> None:
    """One episode against a server: messages in, text out, observations appended as messages."""
    rollout = config.rollout
    start = await reset_episode(env, episode, seed)
    if start is None:
        return
    messages = first_messages(start.system_prompt, start.observation)
    opening = len(messages)
    while episode.model_turns < rollout.max_turns:
        prefill = [{"role": "assistant", "content": rollout.assistant_prefix}] if rollout.assistant_prefix else []
        # rollout.history_turns: the opening messages and the last turns' (answer, observation) pairs, as trained.
        history = messages[opening:][-2 * rollout.history_turns :] if rollout.history_turns else messages[opening:]
        completion = await client.acomplete(
            messages[:opening] + history + prefill,
            temperature=config.eval.temperature,
            max_tokens=rollout.max_new_tokens,
            stop=rollout.stop,
            seed=seed,
            # vLLM's extension for a prefilled answer opening; plain OpenAI servers need no prefix.
            extra={"continue_final_message": True, "add_generation_prompt": False} if prefill else None,
        )
        action = rollout.assistant_prefix + completion.text
        episode.count_turn("length" if completion.finish_reason == "length" else "stop")
        step = await step_episode(env, episode, action)
        if step is None or episode.done:
            break
        messages += [
            {"role": "assistant", "content": action},
            {"role": rollout.observation_role, "content": step.observation},
        ]
    else:
        episode.truncate("max_turns")
    assert episode.trajectory is not None
    episode.trajectory.episode_id = f"eval-{seed}"
