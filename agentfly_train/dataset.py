"""Env tasks as a prompt dataset (JSONL), for trainers that read prompts from files (OpenRLHF).

Each line holds the chat messages an episode starts with (``prompt``: system and user message) and a
``label`` that lets an agent function rebuild the very same episode: the env id, the env options and
the seed (JSON in a string, as OpenRLHF passes labels through untouched).

Example:
    >>> import os, tempfile
    >>> config = Config.from_dict({"env": {"id": "AgentFly/Math-v0", "options": {"difficulty": 0}}})
    >>> path = os.path.join(tempfile.mkdtemp(), "prompts.jsonl")
    >>> export_tasks(config, path, count=3)
    3
    >>> rows = [json.loads(line) for line in open(path)]
    >>> [m["role"] for m in rows[0]["prompt"]], json.loads(rows[2]["label"])["seed"]
    (['system', 'user'], 2)
"""

from __future__ import annotations

import json
import os
from typing import Any

import gymnasium as gym

from agentfly_env.core.types import EpisodeStart
from agentfly_env.resources.files import atomic_path
from agentfly_train.chat import first_messages
from agentfly_train.config import Config


def export_tasks(
    config: Config, path: str | os.PathLike[str], *, count: int, split: str = "train", first_seed: int = 0
) -> int:
    """Write ``count`` episodes' opening messages (env seeds ``first_seed``...) to ``path``; return the count.

    Args:
        config: The env and its options (``split="eval"`` merges ``env.eval_options`` over them).
        path: The JSONL file to write (replaced atomically).
        count: Number of tasks.
        split: ``train`` or ``eval``.
        first_seed: The first env seed.
    """
    config.validate(check_model=False)
    options: dict[str, Any] = {**config.env.options, **(config.env.eval_options if split == "eval" else {})}
    env = gym.make(config.env.id, **options)
    try:
        with atomic_path(path) as scratch, open(scratch, "w") as handle:
            for seed in range(first_seed, first_seed + count):
                start: EpisodeStart = env.reset(seed=seed)[1]["start"]
                messages = first_messages(start.system_prompt, start.observation)
                label = {"env_id": config.env.id, "options": options, "seed": seed}
                handle.write(json.dumps({"prompt": messages, "label": json.dumps(label)}) + "\n")
    finally:
        env.close()
    return count
