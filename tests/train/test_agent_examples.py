"""The calculator agent on the other two APIs agents are written against, and their presets.

``examples/calculator_agent_messages.py`` (the ``anthropic`` client, Anthropic's Messages API) and
``examples/calculator_agent_responses.py`` (the OpenAI Agents SDK's default model, the Responses API; run as a
command in the SDK's own venv, ``make peers``) are ``examples/calculator_agent.py``'s agent: its system prompt,
its own ``calculate`` tool, its scripted ``expert``. Played through the gateway against that expert, each episode
is one token-exact row, the env scores its answer, and the row is the chat-completions example's, token for token
(the gateway renders every dialect with the model's chat template): so the presets
``agent-calculator-messages`` and ``agent-calculator-responses`` are ``agent-calculator``'s run with another
program. The model is scripted; the env is the real AgentFly/Math-v0. What they learn is measured in their
presets' headers (a training run is minutes, not a test).
"""

from __future__ import annotations

import shlex
import sys

import msgspec
import pytest
from serving import REPO_ROOT, peer_python
from test_agents import calculator_config, math_envs, scripted_rollout  # noqa: F401  (math_envs: a fixture)

from agentfly_train.agents import (
    AgentCommand,
    AgentProgram,
    AgentRollout,
    agent_demonstrations,
    gateway_for,
    load_agent,
)
from agentfly_train.chat import ChatFormat
from agentfly_train.cli import build_parser, resolve_config
from agentfly_train.config import Config
from agentfly_train.generation.scripted import ScriptedGenerator

pytest.importorskip("anthropic")
sys.path.insert(0, str(REPO_ROOT / "examples"))
import calculator_agent  # noqa: E402
import calculator_agent_messages  # noqa: E402
import calculator_agent_responses  # noqa: E402

SDK_PYTHON = peer_python("openai-agents", "AGENTFLY_OPENAI_AGENTS_PYTHON")
needs_sdk = pytest.mark.skipif(SDK_PYTHON is None, reason="the OpenAI Agents SDK's venv is missing: make peers")
RESPONSES_COMMAND = f"{SDK_PYTHON} {REPO_ROOT}/examples/calculator_agent_responses.py"


def agent_for(dialect: str) -> AgentProgram | AgentCommand:
    if dialect == "messages":
        return AgentProgram(calculator_agent_messages.solve, "calculator_agent_messages.py:solve")
    return AgentCommand(RESPONSES_COMMAND)


DIALECTS = ["messages", pytest.param("responses", marks=needs_sdk)]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_each_dialect_plays_the_chat_examples_episodes_token_for_token(dialect, math_envs, tokenizer, tmp_path):  # noqa: F811
    chat = scripted_rollout(math_envs, tokenizer, AgentProgram(calculator_agent.solve), tmp_path).run([5, 6], 0)
    result = scripted_rollout(math_envs, tokenizer, agent_for(dialect), tmp_path).run([5, 6], sample_seed=0)
    assert len(result.episodes) == len(chat.episodes) == 4
    for episode, same in zip(result.episodes, chat.episodes, strict=True):
        answer = episode.trajectory.task["answer"]
        assert episode.failure is None and episode.success and episode.reward == 1.0
        assert episode.trajectory.steps[-1].action == f"<answer>{answer}</answer>"  # scored by the env's own reward
        assert (episode.calls.calls, episode.calls.rows, episode.calls.prefix_mismatches) == (2, 1, 0)
        assert episode.calls.tool_calls == 1
        [row], [chat_row] = episode.rows, same.rows
        assert (row.token_ids, row.action_mask, row.logprobs) == (
            chat_row.token_ids,
            chat_row.action_mask,
            chat_row.logprobs,
        )
        sampled = tokenizer.decode([t for t, bit in zip(row.token_ids, row.action_mask, strict=True) if bit])
        assert '"name": "calculate"' in sampled and sampled.endswith(f"{answer}<|im_end|>")


#: A reply past the turn's budget (rollout.max_new_tokens = 64), cut there: an incomplete response, which the Agents
#: SDK raises as a ModelBehaviorError; and a whole reply with no number in it.
RAMBLING = "Let me think about this one. " * 20
NO_NUMBER = "I cannot work that out."


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("reply", [RAMBLING, NO_NUMBER], ids=["cut-at-max-tokens", "no-number"])
def test_a_reply_without_a_number_is_a_wrong_answer_not_a_failed_episode(
    dialect,
    reply,
    math_envs,  # noqa: F811
    tokenizer,
    tmp_path,
):
    """GRPO learns from the losses too: an episode the program played to its end is scored, never left out."""
    config = calculator_config(tmp_path)
    config.rollout = msgspec.structs.replace(config.rollout, samples_per_prompt=1)
    gateway = gateway_for(config, ScriptedGenerator(ChatFormat(tokenizer), lambda prompt: reply), tokenizer)
    [episode] = AgentRollout(math_envs, agent_for(dialect), gateway, config.rollout, config.agent).run([3], 0).episodes
    assert episode.failure is None and not episode.success and episode.reward == 0.0
    assert (episode.calls.calls, episode.calls.rows, episode.calls.cut_calls) == (1, 1, int(reply == RAMBLING))


def test_the_examples_share_the_calculator_agents_tool_prompt_and_expert():
    """The same agent: ``calculate``, the expert, the system prompt and the tool's description are the chat
    example's (the Responses example imports no SDK at import time, so the trainer's venv loads its expert)."""
    for example in (calculator_agent_messages, calculator_agent_responses):
        assert example.expert is calculator_agent.expert and example.calculate is calculator_agent.calculate
        assert example.SYSTEM_PROMPT == calculator_agent.SYSTEM_PROMPT
    [chat_tool] = calculator_agent.TOOLS
    [messages_tool] = calculator_agent_messages.TOOLS
    assert {"name": messages_tool["name"], "description": messages_tool["description"]} == {
        "name": chat_tool["function"]["name"],
        "description": chat_tool["function"]["description"],
    }
    assert messages_tool["input_schema"] == chat_tool["function"]["parameters"] == calculator_agent_responses.PARAMETERS


# ----------------------------------------------------------------------------- the presets

PRESETS = {
    "agent-calculator-messages": "examples/calculator_agent_messages.py",
    "agent-calculator-responses": "examples/calculator_agent_responses.py",
}


@pytest.mark.parametrize("name", PRESETS)
def test_the_presets_are_agent_calculators_run_with_their_example_from_any_directory(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the paths are the preset's own, not the working directory's
    config = Config.load(name).validate(check_model=False)
    example = str(REPO_ROOT / PRESETS[name])
    assert config.agent.expert == f"{example}:expert" and not config.agent.tools
    if name.endswith("-responses"):
        assert not config.agent.program
        assert shlex.split(config.agent.command) == [str(REPO_ROOT / ".venv-peers/openai-agents/bin/python"), example]
    else:
        assert config.agent.program == f"{example}:solve" and not config.agent.command
    assert config.out_dir == f"runs/{name}"
    base = Config.load("agent-calculator").to_dict()
    same = {key: value for key, value in config.to_dict().items() if key not in ("agent", "out_dir")}
    assert same == {key: value for key, value in base.items() if key not in ("agent", "out_dir")}  # its tuned run


@pytest.mark.parametrize(
    "name", ["agent-calculator-messages", pytest.param("agent-calculator-responses", marks=needs_sdk)]
)
def test_the_presets_warm_start_on_their_programs_own_episodes(name, math_envs, tokenizer, tmp_path):  # noqa: F811
    config = Config.load(name)
    if config.agent.command:  # the SDK's venv where this machine has it
        config.agent = msgspec.structs.replace(config.agent, command=RESPONSES_COMMAND)
    config.sft = msgspec.structs.replace(config.sft, expert_episodes=2)
    kept = agent_demonstrations(config, tokenizer, math_envs)
    assert len(kept) == 2 and all(e.success and len(e.rows) == 1 for e in kept)
    assert isinstance(load_agent(config.agent), AgentCommand if config.agent.command else AgentProgram)


def test_a_config_files_command_words_written_as_relative_paths_are_its_folders(tmp_path):
    folder = tmp_path / "configs"
    folder.mkdir()
    command = '../venv/bin/python ./agent.py --model ./weights python agent.py "a b/../c" --x=./y'
    (folder / "run.toml").write_text(f"[agent]\ncommand = '{command}'\n")
    config = Config.load(folder / "run.toml")
    assert shlex.split(config.agent.command) == [
        str(tmp_path / "venv/bin/python"),  # ./ and ../ words: the config file's folder (not resolved)
        str(folder / "agent.py"),
        "--model",
        str(folder / "weights"),
        "python",  # other words as written: PATH's python, the working directory's agent.py, flags
        "agent.py",
        "a b/../c",
        "--x=./y",
    ]
    on_the_command_line = resolve_config(build_parser("train").parse_args(["--agent-command", "./agent.py ../x"]))
    assert on_the_command_line.agent.command == "./agent.py ../x"  # the working directory's, as in a shell
