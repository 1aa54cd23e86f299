"""A synthetic run directory of any size, in the trainer's formats: what the viewer's tests and its
benchmark (``agentfly-bench --suite view``) open.

Episodes alternate between two env ids (a mixed run), take one to three turns with a calculator call
in the first, fail about half the time and are sometimes cut at the turn limit; every episode has a
token record, and every training step a metrics record. With ``agent_programs=True`` the episodes of
two turns or more are recorded as an agent program's are: in two rows, the second a prefix mismatch.

Example:
    >>> import tempfile
    >>> folder = write_synthetic_run(tempfile.mkdtemp(), episodes=8, per_step=4)
    >>> sorted(p.name for p in folder.iterdir())
    ['config.json', 'metrics.jsonl', 'tokens.jsonl', 'trajectories.jsonl']
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from pathlib import Path

import msgspec

from agentfly_env.core.recording import TrajectoryWriter
from agentfly_env.core.types import Step, ToolCall, ToolResult, Trajectory
from agentfly_train.run_files import TOKENS_FILE
from agentfly_train.tokens_log import TokenRecord, TokenRow, mask_runs

ENVS = ("AgentFly/Math-v0", "AgentFly/Search-v0")
MAX_TURNS = 3


def synthetic_trajectory(number: int, per_step: int, rng: random.Random) -> Trajectory:
    """Episode ``number`` of the run: ids, envs, rewards and turns as a training run writes them."""
    a, b = rng.randint(100, 999), rng.randint(100, 999)
    success = rng.random() < 0.5
    turns = rng.randint(1, MAX_TURNS)
    steps = []
    for turn in range(turns):
        last = turn == turns - 1
        if turn == 0:
            call = ToolCall("calculator", {"expression": f"{a} * {b}"})
            steps.append(
                Step(
                    action=f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{a} * {b}"}}}}</tool_call>',
                    observation=str(a * b),
                    reward=0.0,
                    terminated=False,
                    truncated=False,
                    tool_calls=[call],
                    tool_results=[ToolResult("calculator", str(a * b), duration_s=(1 + number % 4) / 1000)],
                )
            )
        else:
            answer = a * b if success else a * b + 1
            steps.append(
                Step(
                    action=f"<answer>{answer}</answer>",
                    observation="",
                    reward=1.0 if success and last else 0.0,
                    terminated=last and (success or turns < MAX_TURNS),  # a wrong last answer at the limit: cut
                    truncated=False,
                    reward_components={"correct": 1.0 if success else 0.0},
                    success=success and last,
                )
            )
    return Trajectory(
        env_id=ENVS[number % len(ENVS)],
        observation=f"What is {a} * {b}? Use the calculator, then answer in <answer> tags.",
        seed=number // per_step,
        task={"question": f"{a} * {b}", "answer": str(a * b)},
        steps=steps,
        episode_id=f"{number // per_step}-{(number % per_step) // 4}-{number % 4}",
        system_prompt="You are a careful calculator user.",
        latency_s=[0.001] * turns,
    )


def synthetic_tokens(trajectory: Trajectory, rng: random.Random, *, agent_program: bool = False) -> TokenRecord:
    """A token record shaped like the trainer's: a prompt, then generated and observation tokens by turn.

    ``agent_program``: an episode of two turns or more is recorded as an agent program's through the
    gateway: a row for its first call, then a row that starts over because the program sent the first
    turn back re-rendered (a prefix mismatch), holding the later turns.
    """
    episode_id = trajectory.episode_id or ""
    steps = trajectory.steps
    if not agent_program or len(steps) < 2:
        whole = _row(*_rendered(trajectory, steps), rng)
        return TokenRecord(episode_id, whole.token_ids, whole.mask_runs, whole.logprobs, whole.pieces)
    first = _row(*_rendered(trajectory, steps[:1]), rng)
    second = _row(*_rendered(trajectory, steps[1:], replayed=steps[:1]), rng, mismatch=True)
    return TokenRecord(episode_id, [], mask_runs([]), rows=[first, second])


def _rendered(
    trajectory: Trajectory, steps: Sequence[Step], replayed: Sequence[Step] = ()
) -> tuple[list[str], list[int]]:
    """The pieces and mask of a conversation: the prompt, the ``replayed`` turns as context (each action
    one piece: re-rendered text, not the model's tokens), then ``steps`` as generated."""
    pieces = ["<|im_start|>", "user", "\n", *trajectory.observation.split(" "), "<|im_end|>"]
    mask = [0] * len(pieces)
    for step, generated in [(step, False) for step in replayed] + [(step, True) for step in steps]:
        words = step.action.replace(">", "> ").split(" ") if generated else [step.action]
        observation = ["<|im_start|>", "tool", "\n", step.observation, "<|im_end|>"]
        pieces += words + observation
        mask += [int(generated)] * len(words) + [0] * len(observation)
    return pieces, mask


def _row(pieces: list[str], mask: list[int], rng: random.Random, *, mismatch: bool = False) -> TokenRow:
    return TokenRow(
        token_ids=[rng.randrange(49152) for _ in pieces],
        mask_runs=mask_runs(mask),
        logprobs=[round(-rng.expovariate(2.0), 4) for bit in mask if bit],
        pieces=pieces,
        mismatch=mismatch,
    )


def write_synthetic_run(
    folder: str | os.PathLike[str], episodes: int, *, per_step: int = 64, seed: int = 0, agent_programs: bool = False
) -> Path:
    """Write a run of ``episodes`` episodes (``per_step`` a training step) into ``folder``; returns it.

    ``agent_programs``: record episodes of two turns or more in rows (see :func:`synthetic_tokens`).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    encoder = msgspec.json.Encoder()
    (folder / "config.json").write_text(
        json.dumps({"algo": "grpo", "env": {"id": ENVS[0]}, "rollout": {"max_turns": MAX_TURNS}})
    )
    step_rewards: dict[int, list[float]] = {}
    with (
        TrajectoryWriter(folder / "trajectories.jsonl", durable=False) as writer,
        open(folder / TOKENS_FILE, "wb") as tokens,
    ):
        for number in range(episodes):
            trajectory = synthetic_trajectory(number, per_step, rng)
            writer.write(trajectory)
            tokens.write(encoder.encode(synthetic_tokens(trajectory, rng, agent_program=agent_programs)) + b"\n")
            step_rewards.setdefault(number // per_step + 1, []).append(trajectory.total_reward)
    with open(folder / "metrics.jsonl", "w") as metrics:
        for step, rewards in step_rewards.items():
            mean = sum(rewards) / len(rewards)
            record = {
                "step": step,
                "reward_mean": mean,
                "success_rate": mean,
                "kl": 0.001 * step,
                "policy_loss": -0.01 * mean,
            }
            metrics.write(json.dumps(record) + "\n")
    return folder
