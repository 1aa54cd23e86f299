"""Warm start from demonstrations: supervised training on the token sequences RL would build.

A model that never calls a tool gets no reward signal for calling one; a short supervised stage on
demonstrations gets it started. Each demonstration becomes exactly the token sequence the rollout
builds for the same turns (:class:`~agentfly_train.rollout.Episode`): the prompt through the chat
template, each model turn as its text's tokens closed by the template's end-of-turn token (mask 1),
each observation as the template's tool turn (mask 0). The loss is the mean negative log-likelihood of
the mask-1 tokens, so nothing is learned from the prompt or the env's text.

Demonstrations are JSONL files, one episode per row, in either of two forms:

* a trajectory (:class:`~agentfly_env.core.types.Trajectory`): what ``agentfly-train collect`` writes from an
  env's scripted expert, and what a run writes to ``trajectories.jsonl`` (keep the good ones with
  ``min_reward``: rejection sampling, expert iteration);
* a chat transcript in OpenAI's format, ``{"messages": [...]}``: system and user messages, assistant
  messages with ``content`` and ``tool_calls``, ``tool`` messages with what the tools said. Tool calls
  are written in the env's tool-call format (``parser``, hermes by default), as the env reads them.

A row that cannot be used (missing fields, an unknown tool, a message the template cannot render) is
reported with its file and line; ``on_bad_row="skip"`` leaves it out, ``"fail"`` stops.

Example:
    >>> rows = [{"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}]
    >>> [demo] = parse_rows(rows, source="inline")
    >>> demo.observation, demo.turns
    ('2+2?', [Turn(action='4', observation=None)])
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from agentfly_env.core.types import ToolCall, Trajectory
from agentfly_env.tools.parsing import get_parser

logger = logging.getLogger("agentfly.train")

OnBadRow = Literal["skip", "fail"]


class DemonstrationError(ValueError):
    """A demonstration row that cannot be used; the message names the file and line."""


@dataclass
class Turn:
    """One model turn of a demonstration and the observation that answered it (None after the last)."""

    action: str
    observation: str | None = None


@dataclass
class Demonstration:
    """One episode to imitate.

    Attributes:
        observation: The first observation (the user's message).
        turns: The model's turns, in order, each with the observation that followed it.
        system_prompt: The system message, if any.
        source: ``file:line``, for messages about it.
        reward: The episode's return, when the row says (trajectories).
    """

    observation: str
    turns: list[Turn] = field(default_factory=list)
    system_prompt: str | None = None
    source: str = ""
    reward: float | None = None


def read_demonstrations(
    paths: Sequence[str | os.PathLike[str]],
    *,
    min_reward: float | None = None,
    parser: str = "hermes",
    on_bad_row: OnBadRow = "skip",
) -> list[Demonstration]:
    """Every usable demonstration in ``paths`` (JSONL files), in order.

    Args:
        paths: JSONL files of trajectories or chat transcripts (mixed freely).
        min_reward: Keep only episodes whose return is at least this (rows without one are kept).
        parser: The tool-call format that chat transcripts' ``tool_calls`` are written in.
        on_bad_row: ``skip`` a bad row (logged with its file and line) or ``fail`` on it.

    Raises:
        DemonstrationError: a bad row with ``on_bad_row="fail"``, or no usable row at all.
        FileNotFoundError: a file that does not exist.
    """
    demos: list[Demonstration] = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            rows = _json_lines(handle, str(path), on_bad_row)
            demos += parse_rows(rows, source=str(path), parser=parser, on_bad_row=on_bad_row)
    kept = rewarded(demos, min_reward)
    if not kept:
        raise DemonstrationError(
            f"no usable demonstration in {', '.join(map(str, paths))}"
            + (f" with a return of at least {min_reward}" if min_reward is not None else "")
        )
    return kept


def _json_lines(lines: Iterable[str], source: str, on_bad_row: OnBadRow) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as error:
            _bad(f"{source}:{number}: not JSON ({error.msg})", on_bad_row)


def rewarded(demos: list[Demonstration], min_reward: float | None) -> list[Demonstration]:
    """The demonstrations whose return is at least ``min_reward`` (all of them for None; rows without a return
    are kept)."""
    return [d for d in demos if min_reward is None or d.reward is None or d.reward >= min_reward]


def parse_rows(
    rows: Iterable[Any],
    *,
    source: str,
    parser: str = "hermes",
    on_bad_row: OnBadRow = "skip",
) -> list[Demonstration]:
    """Demonstrations from decoded rows (``(line, row)`` pairs, or bare rows numbered from 1)."""
    formatter = get_parser(parser)
    demos = []
    for index, item in enumerate(rows, 1):
        number, row = item if isinstance(item, tuple) else (index, item)
        where = f"{source}:{number}"
        try:
            demo = (
                _from_messages(row, formatter) if isinstance(row, dict) and "messages" in row else _from_trajectory(row)
            )
        except (DemonstrationError, msgspec.ValidationError, ValueError, TypeError) as error:
            _bad(f"{where}: {error}", on_bad_row)
            continue
        demo.source = where
        demos.append(demo)
    return demos


def _bad(message: str, on_bad_row: OnBadRow) -> None:
    if on_bad_row == "fail":
        raise DemonstrationError(message)
    logger.warning("skipped demonstration %s", message)


def _from_trajectory(row: Any) -> Demonstration:
    trajectory = msgspec.convert(row, Trajectory)
    if not trajectory.steps:
        raise DemonstrationError("a trajectory without steps has nothing to imitate")
    last = len(trajectory.steps) - 1
    turns = [Turn(step.action, None if i == last else step.observation) for i, step in enumerate(trajectory.steps)]
    return Demonstration(
        trajectory.observation,
        turns,
        trajectory.system_prompt,
        reward=sum(step.reward for step in trajectory.steps),
    )


def _from_messages(row: dict[str, Any], formatter: Any) -> Demonstration:
    messages = row["messages"]
    if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise DemonstrationError("'messages' must be a list of {'role': ..., 'content': ...} objects")
    system = None
    if messages and messages[0]["role"] == "system":
        system, messages = _text(messages[0]), messages[1:]
    if not messages or messages[0]["role"] != "user":
        raise DemonstrationError("the conversation must open with a user message (after an optional system one)")
    known = _tool_names(row.get("tools"))
    demo = Demonstration(_text(messages[0]), system_prompt=system, reward=row.get("reward"))
    observation: list[str] = []
    for message in messages[1:]:
        role = message["role"]
        if role == "assistant":
            if demo.turns:
                demo.turns[-1].observation = "\n".join(observation)
            elif observation:
                raise DemonstrationError("a tool or user message before the first assistant message")
            observation = []
            demo.turns.append(Turn(_assistant_text(message, formatter, known)))
        elif role in ("tool", "user"):
            if not demo.turns:
                raise DemonstrationError(f"a {role} message before the first assistant message")
            observation.append(_text(message))
        else:
            raise DemonstrationError(f"unknown role {role!r} (system, user, assistant or tool)")
    if not demo.turns:
        raise DemonstrationError("no assistant message: nothing to imitate")
    if observation:  # the conversation ends on what a tool said: the last turn is the last assistant one
        demo.turns[-1].observation = None
    return demo


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, list):  # OpenAI's content parts: keep the text ones
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if not isinstance(content, str):
        raise DemonstrationError(f"a {message['role']} message's content must be text, got {type(content).__name__}")
    return content


def _tool_names(tools: Any) -> set[str] | None:
    """The tool names a row declares (OpenAI ``tools``), or None when it declares none."""
    if not tools:
        return None
    return {tool.get("function", tool).get("name") for tool in tools if isinstance(tool, dict)}


def _assistant_text(message: dict[str, Any], formatter: Any, known: set[str] | None) -> str:
    """The assistant's turn as model text: its content, then its tool calls in the env's format."""
    parts = [_text(message)]
    for call in message.get("tool_calls") or []:
        function = call.get("function", call) if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise DemonstrationError(f"a tool call needs a function name, got {call!r}")
        if known is not None and function["name"] not in known:
            raise DemonstrationError(
                f"a call to {function['name']!r}, which is not among the row's tools {sorted(known)}"
            )
        arguments = function.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as error:
                raise DemonstrationError(f"the arguments of {function['name']!r} are not JSON: {error.msg}") from None
        parts.append(formatter.format_call(ToolCall(name=function["name"], arguments=arguments)))
    return "\n".join(part for part in parts if part)


def encode(chat: Any, demo: Demonstration, *, max_tokens: int | None = None, history_turns: int = 0) -> Any:
    """The token sequence of ``demo`` as the rollout builds it: an :class:`~agentfly_train.rollout.Episode`
    whose ``action_mask`` marks the model's turns (each closed by the template's end-of-turn token); with
    ``history_turns`` (``rollout.history_turns``) trained as the rollout's windows, each turn in the context the
    policy will see.

    Raises:
        DemonstrationError: a sequence (a window) is longer than ``max_tokens``, or the template cannot render it.
    """
    from agentfly_train.chat import ChatTemplateError
    from agentfly_train.rollout import Episode, Turn

    episode = Episode(group=0, chain=0, seed=0, history_turns=history_turns)
    try:
        prompt = chat.encode_prompt(demo.system_prompt, demo.observation)
    except ChatTemplateError as error:
        raise DemonstrationError(f"{demo.source}: {error}") from None
    episode.append(prompt, generated=False)
    episode.prompt_length = len(prompt)
    closing = chat.closing_id
    for turn in demo.turns:
        action = chat.content_ids(turn.action) + [closing]
        episode.turns.append(Turn(len(episode.token_ids), len(episode.token_ids) + len(action), "stop"))
        episode.append(action, generated=True, logprobs=[0.0] * len(action))
        if turn.observation is not None:
            episode.append(chat.encode_observation(turn.observation, action), generated=False)
    longest = max(len(sequence.token_ids) for sequence in episode.sequences)
    if max_tokens is not None and longest > max_tokens:
        raise DemonstrationError(
            f"{demo.source}: {longest} tokens, more than the {max_tokens} allowed (rollout.max_episode_tokens)"
        )
    return episode


def write_jsonl(rows: Iterable[Any], path: str | os.PathLike[str]) -> int:
    """Write rows (msgspec Structs or plain data) as JSONL; returns how many."""
    encoder = msgspec.json.Encoder()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(path, "wb") as handle:
        for row in rows:
            handle.write(encoder.encode(row) + b"\n")
            count += 1
    return count


@dataclass
class SFTResult:
    """What a warm start did: the loss at each optimiser step, tokens trained on, wall time."""

    losses: list[float]
    episodes: int
    action_tokens: int
    seconds: float


def train_sft(
    policy: Any,
    episodes: Sequence[Any],
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    pad_id: int,
    micro_batch_size: int | None = None,
    seed: int = 0,
    max_grad_norm: float = 1.0,
) -> SFTResult:
    """Fit ``policy`` to the model turns of ``episodes`` (from :func:`encode`): AdamW on the mean
    negative log-likelihood of the mask-1 tokens, ``batch_size`` episodes per step, shuffled each epoch.
    Gradients accumulate over micro-batches of ``micro_batch_size`` similar lengths (default: the whole
    batch at once), which bounds the activations' memory without changing the step."""
    import time

    import torch

    from agentfly_train.training import Batch, sequence_logprobs

    started = time.perf_counter()
    device = next(policy.parameters()).device
    optimizer = torch.optim.AdamW(policy.parameters(), lr=lr)
    order = torch.Generator().manual_seed(seed)
    losses: list[float] = []
    was_training = policy.training
    policy.train()
    try:
        for _ in range(epochs):
            for rows in torch.randperm(len(episodes), generator=order).split(batch_size):
                batch = Batch.from_episodes([episodes[int(i)] for i in rows], pad_id, device)
                tokens = batch.action_mask.sum()
                optimizer.zero_grad(set_to_none=True)
                loss = 0.0
                for micro in batch.micro_batches(torch.arange(len(rows)), micro_batch_size or len(rows)):
                    ids, attention, mask = batch.slice(micro)
                    share = -(sequence_logprobs(policy, ids, attention, mask, 1.0) * mask).sum() / tokens
                    share.backward()
                    loss += share.item()
                if max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
                optimizer.step()
                losses.append(loss)
    finally:
        policy.train(was_training)
    return SFTResult(
        losses=losses,
        episodes=len(episodes),
        action_tokens=sum(e.generated_tokens for e in episodes),
        seconds=time.perf_counter() - started,
    )


def warm_start(config: Any, policy: Any, tokenizer: Any, env_fn: Callable[[], Any] | None = None) -> SFTResult:
    """The ``[sft]`` stage of ``config`` on ``policy``: its :func:`demonstrations`, trained on (:func:`fine_tune`)."""
    return fine_tune(config, policy, tokenizer, demonstrations(config, tokenizer, env_fn))


def fine_tune(config: Any, policy: Any, tokenizer: Any, episodes: Sequence[Any]) -> SFTResult:
    """``episodes`` (encoded demonstrations, or a rollout's own episodes) trained on with the ``[sft]`` section's
    epochs, learning rate and batch size: the warm start's training, and self-imitation's."""
    from agentfly_train.models import pad_id

    return train_sft(
        policy,
        episodes,
        epochs=config.sft.epochs,
        lr=config.sft.lr,
        batch_size=config.sft.batch_size,
        pad_id=pad_id(tokenizer),
        micro_batch_size=config.train.micro_batch_size,
        seed=config.seed,
        max_grad_norm=config.train.max_grad_norm,
    )


def demonstrations(config: Any, tokenizer: Any, env_fn: Callable[[], Any] | None = None) -> list[Any]:
    """The ``[sft]`` section's demonstrations, encoded with the rollout's chat format and token budget: read from
    its files, and played by the env's expert (``env_fn``'s envs when given, the trainer's own, else
    ``config.env``'s) or, for an agent program, by the program against ``agent.expert``. Rows too long for
    ``rollout.max_episode_tokens`` count as bad rows.

    Raises:
        DemonstrationError: none is left.
    """
    from agentfly_train.chat import ChatFormat

    sft = config.sft
    chat = ChatFormat(tokenizer, config.rollout.observation_role)
    demos = (
        read_demonstrations(sft.data, min_reward=sft.min_reward, parser=sft.parser, on_bad_row=sft.on_bad_row)
        if sft.data
        else []
    )
    if sft.expert_episodes and not config.agent.plays:
        experts = collect_expert(env_fn or config.env.id, sft.expert_episodes, options=config.env.options)
        demos += rewarded(
            parse_rows((msgspec.to_builtins(t) for t in experts), source=f"{config.env.id} expert"), sft.min_reward
        )
    episodes = []
    for demo in demos:
        try:
            episodes.append(
                encode(
                    chat,
                    demo,
                    max_tokens=config.rollout.max_episode_tokens,
                    history_turns=config.rollout.history_turns,
                )
            )
        except DemonstrationError as error:
            _bad(str(error), sft.on_bad_row)
    if sft.expert_episodes and config.agent.plays:  # the program's own format, played against agent.expert
        episodes += _agent_demonstrations(config, tokenizer, env_fn)
    if not episodes:
        raise DemonstrationError("no demonstration fits rollout.max_episode_tokens")
    return episodes


def _agent_demonstrations(config: Any, tokenizer: Any, env_fn: Callable[[], Any] | None) -> list[Any]:
    from agentfly_env.core.aio import run_sync
    from agentfly_train.agents import agent_demonstrations
    from agentfly_train.rollout import run_env_pool

    size = min(config.episodes_per_step, config.sft.expert_episodes)  # as many at once as a training step plays
    envs = run_env_pool(config, size, env_fn=env_fn)
    try:
        episodes = agent_demonstrations(config, tokenizer, envs)
    finally:
        run_sync(envs.close())
    logger.info(
        "warm start: %s solved %d of %d training tasks against %s",
        config.agent.program or config.agent.command,
        len(episodes),
        config.sft.expert_episodes,
        config.agent.expert,
    )
    return episodes


def collect_expert(
    env: str | Callable[[], Any], episodes: int, *, options: dict[str, Any] | None = None, first_seed: int = 0
) -> Iterator[Trajectory]:
    """Trajectories of an env's scripted expert on tasks ``first_seed, first_seed + 1, ...``, recorded
    by the env as every episode driver records them. ``env`` is a registered id (made with ``options``)
    or a function that builds the env.

    Raises:
        ValueError: the env has no scripted expert.
    """
    import gymnasium as gym

    import agentfly_env  # noqa: F401 - registers the ids
    from agentfly_env.core.episode import play_episode
    from agentfly_env.core.policies import expert_action, has_expert

    env = gym.make(env, **(options or {})) if isinstance(env, str) else env()
    try:
        if not has_expert(env):
            raise ValueError(f"{env.unwrapped.env_id} has no scripted expert to collect demonstrations from")
        for seed in range(first_seed, first_seed + episodes):
            trajectory = play_episode(env, expert_action, seed=seed)  # the next reset starts a new record
            trajectory.episode_id = f"expert-{seed}"
            yield trajectory
    finally:
        env.close()
