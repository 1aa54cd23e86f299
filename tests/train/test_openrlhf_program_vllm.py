"""Agent programs on OpenRLHF 0.11.2's own rollout actor with a real vLLM engine (vLLM's CPU build, SmolLM2-135M).

OpenRLHF's ``RolloutRayActor`` is built in this process (the ``openrlhf_actor`` fixture of conftest.py) with the
program plug-in (the agent file the launcher writes for a program, bound to its settings file); its
``generate_responses``, what OpenRLHF's sample generator calls for a
prompt row, runs the example calculator agent through the gateway against the actor's own engine: first as a
function (``--agent examples/calculator_agent.py:solve``, an ``openai`` client program), then as a command
(``--agent-command "python examples/calculator_agent_command.py"``). Every output the engine returns is recorded,
so each returned row is held to it token for token, and then turned into a training sample by OpenRLHF itself.
"""

from __future__ import annotations

import sys

import vllm
from openrlhf.trainer.ray.vllm_engine import _load_agent_executor
from serving import REPO_ROOT
from test_openrlhf_program import as_experience, calculator_prompt

from agentfly_train.backends.openrlhf.settings import Settings, write_plugin
from agentfly_train.config import AgentConfig

MAX_LENGTH = 512
TURN_TOKENS = 16
PROGRAM = AgentConfig(program=f"{REPO_ROOT}/examples/calculator_agent.py:solve", tools=False, timeout_s=120)
COMMAND = AgentConfig(command=f"{sys.executable} {REPO_ROOT}/examples/calculator_agent_command.py", tools=False)


def assert_rows_are_what_vllm_sampled(rows: list[dict], outputs: list) -> None:
    """Each action range holds exactly the tokens of one engine output, sampled to continue exactly the tokens before
    it, with its log-probs; every output is used once; the rest of the row has log-prob 0."""
    unmatched = list(outputs)
    for row in rows:
        tokens, logprobs = row["observation_tokens"], row["rollout_log_probs"]
        assert len(logprobs) == len(tokens) <= MAX_LENGTH and row["action_ranges"]
        inside = set()
        for start, end in row["action_ranges"]:
            match = next(o for o in unmatched if o[0] == tokens[:start] and list(o[2].token_ids) == tokens[start:end])
            unmatched.remove(match)
            sampled = match[2]
            assert logprobs[start:end] == [step[t].logprob for step, t in zip(sampled.logprobs, sampled.token_ids)]
            assert 1 <= len(sampled.token_ids) <= TURN_TOKENS
            inside.update(range(start, end))
        assert all(lp == 0.0 for i, lp in enumerate(logprobs) if i not in inside)
        # The env scored the program's answer; one row, continued exactly.
        logs = row["extra_logs"]
        assert isinstance(row["reward"], float) and row["reward"] == row["scores"] == logs["success"]
        assert (logs["failed"], logs["rows"], logs["rows_dropped"], logs["prefix_mismatches"]) == (0.0, 1.0, 0.0, 0.0)
        assert logs["turns"] == len(row["action_ranges"])
        experience = as_experience(row)
        assert experience.action_mask.sum() == len(inside) and experience.rewards.tolist() == [row["reward"]]
    assert unmatched == []


async def test_programs_on_openrlhfs_actor_return_exactly_what_vllm_sampled(openrlhf_actor, tokenizer, tmp_path):
    settings = Settings(pool="local", max_turn_tokens=TURN_TOKENS, tools=("calculator",), agent=PROGRAM)
    actor = await openrlhf_actor(settings, MAX_LENGTH)
    prompt, label = calculator_prompt(tmp_path, tokenizer, seed=3)
    sampling = vllm.SamplingParams(temperature=1.0, top_p=1.0, max_tokens=None, min_tokens=1, logprobs=1)

    rows = await actor.generate_responses(prompt, label, sampling, MAX_LENGTH, tokenizer, num_samples=2)
    assert len(rows) == 2
    assert_rows_are_what_vllm_sampled(rows, actor.outputs)
    assert all(row["extra_logs"]["tool/calculator/calls"] == 0.0 for row in rows)  # its calculator is its own

    # The same agent as a command: a process of its own, which reaches the actor's gateway from outside.
    command_file = write_plugin(
        tmp_path / "command", Settings(pool="local", max_turn_tokens=TURN_TOKENS, agent=COMMAND)
    )
    actor.executor = _load_agent_executor(str(command_file))  # as OpenRLHF loads it
    assert actor.executor.settings.agent == COMMAND
    actor.outputs.clear()
    rows = await actor.generate_responses(prompt, label, sampling, MAX_LENGTH, tokenizer, num_samples=1)
    assert_rows_are_what_vllm_sampled(rows, actor.outputs)
