"""The warm start: demonstrations read from trajectories and chat transcripts, encoded into exactly the
token sequence the rollout builds, bad rows reported by line, and a model that learns from them."""

from __future__ import annotations

import json
from io import StringIO

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from test_train_rollout import tiny_model

from agentfly_env.resources.distributed import make_env_pool
from agentfly_env.tools.parsing import get_parser
from agentfly_train.chat import ChatFormat
from agentfly_train.cli import main
from agentfly_train.config import RolloutConfig
from agentfly_train.console import StepReport
from agentfly_train.generation import Generation
from agentfly_train.rollout import Rollout
from agentfly_train.sft import (
    DemonstrationError,
    collect_expert,
    encode,
    parse_rows,
    read_demonstrations,
    train_sft,
    warm_start,
    write_jsonl,
)

MATH = ("AgentFly/Math-v0", {"dataset": "basic_arithmetic", "tools": ["calculator"]})
CALL = {"type": "function", "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'}}
TOOLS = [{"type": "function", "function": {"name": "calculator", "parameters": {}}}]


def chat_row(**extra):
    return {
        "messages": [
            {"role": "system", "content": "Use the calculator."},
            {"role": "user", "content": "What is 6*7?"},
            {"role": "assistant", "content": "Let me compute.", "tool_calls": [CALL]},
            {"role": "tool", "content": "42"},
            {"role": "assistant", "content": "<answer>42</answer>"},
        ],
        "tools": TOOLS,
        **extra,
    }


class Replay:
    """A generator that 'samples' the given turns' tokens, each closed by the template's end-of-turn token."""

    def __init__(self, chat, actions):
        self.turns = [chat.content_ids(action) + [chat.closing_id] for action in actions]
        self.calls = 0

    def generate(self, requests, params):
        out = []
        for _ in requests:
            tokens = self.turns[self.calls]
            self.calls += 1
            out.append(Generation(tokens, [-0.1] * len(tokens), "stop"))
        return out


# ----------------------------------------------------------------------------- the same tokens as RL


def test_an_expert_demonstration_encodes_to_the_tokens_a_rollout_builds(tokenizer):
    chat = ChatFormat(tokenizer)
    [trajectory] = collect_expert(MATH[0], 1, options=MATH[1], first_seed=4)
    [demo] = parse_rows([msgspec_builtins(trajectory)], source="expert")
    assert len(demo.turns) >= 2 and demo.turns[-1].observation is None  # a tool call, then the answer
    encoded = encode(chat, demo)
    # The rollout, playing the same env task with a generator that produces the expert's turns.
    envs = make_env_pool(*MATH, size=1)
    config = RolloutConfig(samples_per_prompt=1, max_turns=6, max_new_tokens=200, max_episode_tokens=4096)
    [played] = Rollout(envs, chat, Replay(chat, [t.action for t in demo.turns]), config).run([4], 0).episodes
    assert played.success and played.reward == 1.0
    assert encoded.token_ids == played.token_ids
    assert encoded.action_mask == played.action_mask
    assert demo.reward == 1.0


def msgspec_builtins(value):
    import msgspec

    return msgspec.to_builtins(value)


def test_a_chat_transcript_writes_its_tool_calls_as_the_env_reads_them(tokenizer):
    [demo] = parse_rows([chat_row()], source="inline")
    assert demo.system_prompt == "Use the calculator." and demo.observation == "What is 6*7?"
    first, last = demo.turns
    assert first.observation == "42" and last.observation is None and last.action == "<answer>42</answer>"
    [call] = get_parser("hermes").parse(first.action).calls
    assert (call.name, call.arguments) == ("calculator", {"expression": "6*7"})
    assert first.action.startswith("Let me compute.")
    episode = encode(ChatFormat(tokenizer), demo)
    generated = [t for t, m in zip(episode.token_ids, episode.action_mask, strict=True) if m]
    assert tokenizer.decode(generated).count("<|im_end|>") == 2  # each model turn ends itself


# ----------------------------------------------------------------------------- bad rows


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "must open with a user message"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "no assistant message"),
        (
            chat_row(tools=[{"type": "function", "function": {"name": "search"}}]),
            "'calculator', which is not among the row's tools",
        ),
        ({"messages": [{"role": "user", "content": "q"}, {"role": "robot", "content": "x"}]}, "unknown role 'robot'"),
        ({"observation": "q", "env_id": "x", "steps": []}, "without steps"),
        ({"observation": "q"}, "env_id"),
    ],
)
def test_a_bad_row_is_named_by_line_and_skipped_or_refused(tmp_path, row, message, caplog):
    path = tmp_path / "demos.jsonl"
    path.write_text(json.dumps(chat_row()) + "\n" + json.dumps(row) + "\n" + "{not json\n")
    with caplog.at_level("WARNING", logger="agentfly.train"):
        kept = read_demonstrations([path])
    assert len(kept) == 1 and kept[0].source == f"{path}:1"
    assert f"{path}:2" in caplog.text and message in caplog.text and f"{path}:3: not JSON" in caplog.text
    with pytest.raises(DemonstrationError, match=f"{path}:2: .*{message}"):
        read_demonstrations([path], on_bad_row="fail")


def test_rejection_sampling_keeps_episodes_with_enough_reward(tmp_path):
    path = tmp_path / "run.jsonl"
    write_jsonl(collect_expert(MATH[0], 2, options=MATH[1]), path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[1]["steps"][-1]["reward"] = 0.0  # a failed episode of an earlier run
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert [d.reward for d in read_demonstrations([path], min_reward=0.5)] == [1.0]
    with pytest.raises(DemonstrationError, match="at least 2"):
        read_demonstrations([path], min_reward=2)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=8),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(
                    st.sampled_from(
                        [
                            "messages",
                            "role",
                            "content",
                            "tool_calls",
                            "steps",
                            "observation",
                            "env_id",
                            "action",
                            "function",
                        ]
                    ),
                    inner,
                    max_size=4,
                )
            ),
            max_leaves=12,
        ),
        max_size=4,
    )
)
def test_any_json_row_is_read_or_reported_never_crashes(rows):
    demos = parse_rows(rows, source="fuzz")  # skip mode: every bad row is logged and left out
    assert all(demo.turns for demo in demos)
    for demo in demos:
        assert isinstance(demo.observation, str) and all(isinstance(t.action, str) for t in demo.turns)


# ----------------------------------------------------------------------------- learning from them


def test_a_warm_start_teaches_a_tiny_model_the_demonstrated_turns(tokenizer):
    chat = ChatFormat(tokenizer)
    [demo] = parse_rows([chat_row()], source="inline")
    episode = encode(chat, demo)
    model = tiny_model(tokenizer, seed=3)
    result = train_sft(model, [episode] * 4, epochs=80, lr=1e-2, batch_size=4, pad_id=tokenizer.pad_token_id)
    assert result.losses[-1] < 0.2 * result.losses[0] and result.action_tokens == 4 * sum(episode.action_mask)
    # Greedy decoding from the prompt now writes the demonstrated first turn, tool call included.
    ids = torch.tensor([episode.token_ids[: episode.prompt_length]])
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=40, do_sample=False, eos_token_id=chat.closing_id)
    text = tokenizer.decode(out[0, ids.size(1) :])
    assert '"name": "calculator"' in text, text


def test_micro_batches_accumulate_to_the_whole_batchs_step(tokenizer):
    chat = ChatFormat(tokenizer)
    rows = [chat_row()]
    for question in ("What is 6*7? Show the call.", "Please tell me: what is 6*7, computed with the tool?"):
        row = chat_row()
        row["messages"][1] = {"role": "user", "content": question}
        rows.append(row)
    episodes = [encode(chat, demo) for demo in parse_rows(rows, source="inline")]
    assert len({len(e.token_ids) for e in episodes}) == 3  # padding differs between the groupings
    trained = []
    for micro in (None, 1, 2):
        model = tiny_model(tokenizer, seed=5)
        result = train_sft(
            model, episodes * 2, epochs=2, lr=1e-2, batch_size=6, pad_id=tokenizer.pad_token_id, micro_batch_size=micro
        )
        trained.append((result.losses, torch.cat([p.detach().flatten() for p in model.parameters()])))
    (whole_losses, whole), *others = trained
    moved = (whole - torch.cat([p.detach().flatten() for p in tiny_model(tokenizer, seed=5).parameters()])).abs()
    assert moved.max() > 1e-3  # the steps moved the weights
    for losses, params in others:
        assert losses == pytest.approx(whole_losses, rel=1e-4)
        # The same steps up to float32's order of summation, which differs with the grouping: within 0.1% of
        # the largest move the whole batch's steps made.
        assert (params - whole).abs().max() <= 1e-3 * moved.max()


def test_collect_then_sft_from_the_command_line(tmp_path, tiny_model_dir, capsys):
    demos = tmp_path / "expert.jsonl"
    env_options = ["--env-option", 'tools=["calculator"]', "--env-option", 'dataset="basic_arithmetic"']
    assert main(["collect", "--env", MATH[0], *env_options, "--episodes", "3", "--output", str(demos)]) == 0
    assert len(demos.read_text().splitlines()) == 3
    out = tmp_path / "warm"
    code = main(
        ["sft", "--model", tiny_model_dir, "--data", str(demos), "--epochs", "2", "--out", str(out), "--lr", "1e-4"]
    )
    assert code == 0 and (out / "final" / "model.safetensors").is_file()
    printed = capsys.readouterr().out
    assert "sft: 3 episodes" in printed and "loss" in printed
    with pytest.raises(SystemExit):
        main(["sft", "--model", tiny_model_dir, "--out", str(out)])  # no data: a usage error


def test_a_run_warm_starts_on_expert_episodes_and_reports_three_stages(tokenizer, tmp_path):
    from agentfly_train.backends.local import LocalTrainer
    from agentfly_train.config import Config
    from agentfly_train.metrics import read_metrics

    env_id, options = MATH
    config = Config.from_dict(
        {
            "out_dir": str(tmp_path),
            "env": {"id": env_id, "options": {**options, "describe_tools": False, "system_prompt": "Calculate."}},
            "rollout": {
                "generator": "transformers",
                "prompts_per_step": 2,
                "samples_per_prompt": 2,
                "max_turns": 2,
                "max_new_tokens": 8,
            },
            "train": {"steps": 1},
            "sft": {"expert_episodes": 4, "epochs": 2, "batch_size": 4},
            "eval": {"episodes": 3, "stages": True},
            "log": {"tensorboard": False, "plot": False, "progress": False},
        }
    )
    summary = LocalTrainer(config, model=tiny_model(tokenizer), tokenizer=tokenizer).fit()
    assert list(summary["stages"]) == ["base", "warm start", "rl"]
    for row in summary["stages"].values():
        assert 0.0 <= row["success_rate"] <= 1.0 and row["turns_per_episode"] >= 1
    [warm] = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "sft_loss_first" in r]
    assert warm["step"] == 0 and warm["sft_episodes"] == 4 and warm["sft_loss_last"] < warm["sft_loss_first"]
    assert (tmp_path / "stages" / "warm-start" / "eval" / "summary.json").is_file()


@pytest.mark.parametrize("min_reward", [None, 1.0])
def test_min_reward_keeps_only_the_experts_wins(tokenizer, min_reward):
    """An expert that runs out of turns (one turn: it calls the calculator, never answers) scores 0: with
    sft.min_reward = 1 none of its episodes is a demonstration; without it, all are."""
    from agentfly_train.config import Config

    env_id, options = MATH
    config = Config.from_dict(
        {
            "env": {"id": env_id, "options": {**options, "max_turns": 1}},
            "rollout": {"max_turns": 1},
            "sft": {"expert_episodes": 3, "batch_size": 3, "min_reward": min_reward},
        }
    )
    if min_reward is None:
        assert warm_start(config, tiny_model(tokenizer), tokenizer).episodes == 3
    else:
        with pytest.raises(DemonstrationError, match="no demonstration"):
            warm_start(config, tiny_model(tokenizer), tokenizer)


# ----------------------------------------------------------------------------- self-imitation


def own_logprob(trainer, episodes) -> float:
    """The policy's summed log-prob of the episodes' own turns."""
    from agentfly_train.training import Batch, sequence_logprobs

    batch = Batch.from_episodes(episodes, trainer.pad_id, trainer.device)
    ids, attention, mask = batch.slice(torch.arange(len(batch)))
    with torch.no_grad():
        return float((sequence_logprobs(trainer.policy, ids, attention, mask, 1.0) * mask).sum())


@pytest.mark.parametrize("every", [0, 1])
def test_self_imitation_fine_tunes_on_the_policys_own_wins(tokenizer, tmp_path, every):
    """With RL's own step all but off (a learning rate of 1e-12), only self-imitation can move the policy: it makes
    the step's winning episodes (a return of at least min_reward) likelier; without it they stay as they were."""
    from test_train_learning import ShoutEnv, shout_config

    from agentfly_train.backends.local import LocalTrainer

    torch.set_num_threads(1)
    config = shout_config("grpo", tmp_path, steps=1, lr=1e-12, epochs=1)
    config.sft.self_imitation_every, config.sft.min_reward, config.sft.lr = every, 0.3, 1e-2
    config.sft.epochs, config.sft.batch_size = 4, 2
    trainer = LocalTrainer(config, model=tiny_model(tokenizer), tokenizer=tokenizer, env_fn=ShoutEnv)
    try:
        metrics = trainer.train_step()
        wins = [episode for episode in trainer.last_episodes if episode.reward >= 0.3]
        assert wins and len(wins) < len(trainer.last_episodes)  # some won, some did not
        after = own_logprob(trainer, wins)
        trainer.policy.load_state_dict(tiny_model(tokenizer).state_dict())  # the same seeded start
        before = own_logprob(trainer, wins)
    finally:
        trainer.close()
    printed = StringIO()
    StepReport(Console(file=printed, width=400), 1, bar=False)(1, metrics)
    assert (f"; self-imitation on {len(wins)} wins, " in printed.getvalue()) == bool(every)
    if every:
        assert metrics["self_imitation_episodes"] == len(wins) and trainer.own_wins == []
        assert after > before + 100, (before, after)  # -727 -> -285 when this was written
    else:
        assert "self_imitation_episodes" not in metrics and after == pytest.approx(before, abs=1e-3)
