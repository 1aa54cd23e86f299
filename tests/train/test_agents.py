"""Agent programs as they are (``agentfly_train.agents``): the contract, a batch of episodes through the gateway,
how a program fails, and how the update takes an episode of several rows.

The model is scripted (:class:`~agentfly_train.generation.scripted.ScriptedGenerator`) where a test checks what
was recorded; a small random model where the trainer's machinery is under test. The env is the real
AgentFly/Math-v0 and the program is the real example, ``examples/calculator_agent.py``.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from serving import REPO_ROOT
from test_train_rollout import tiny_model

from agentfly_env.core.aio import run_sync
from agentfly_env.core.types import TOOL_METRICS
from agentfly_env.resources.distributed import make_env_pool
from agentfly_train import algorithms
from agentfly_train.agents import AgentCommand, AgentProgram, AgentRollout, AgentTask, gateway_for
from agentfly_train.backends.local import LocalTrainer
from agentfly_train.chat import ChatFormat
from agentfly_train.config import Config, ConfigError
from agentfly_train.evaluate import evaluate
from agentfly_train.generation.scripted import ScriptedGenerator
from agentfly_train.metrics import episode_metrics, per_env_metrics, read_metrics
from agentfly_train.run_files import METRICS_FILE, TOKENS_FILE
from agentfly_train.tokens_log import TokenRecord

openai = pytest.importorskip("openai")

sys.path.insert(0, str(REPO_ROOT / "examples"))
import calculator_agent  # noqa: E402

EXAMPLE = f"{REPO_ROOT}/examples/calculator_agent.py"


def calculator_config(out_dir, **agent) -> Config:
    """The agent-calculator preset, made small."""
    config = Config.load("agent-calculator")
    config.out_dir = str(out_dir)
    config.agent = msgspec.structs.replace(
        config.agent, **{"program": f"{EXAMPLE}:solve", "expert": f"{EXAMPLE}:expert", "timeout_s": 60.0, **agent}
    )
    config.rollout = msgspec.structs.replace(config.rollout, prompts_per_step=2, samples_per_prompt=2)
    config.eval = msgspec.structs.replace(config.eval, episodes=4, stages=False)
    config.log = msgspec.structs.replace(config.log, tensorboard=False, plot=False, progress=False)
    return config


@pytest.fixture
def math_envs():
    config = Config.load("agent-calculator")
    envs = make_env_pool(config.env.id, config.env.options, size=4)
    yield envs
    run_sync(envs.close())


def scripted_rollout(envs, tokenizer, program, tmp_path, **agent) -> AgentRollout:
    """The program against the example's scripted expert, through a gateway."""
    config = calculator_config(tmp_path, **agent)
    gateway = gateway_for(config, ScriptedGenerator(ChatFormat(tokenizer), calculator_agent.expert), tokenizer)
    return AgentRollout(envs, program, gateway, config.rollout, config.agent)


def test_the_example_program_plays_token_exact_episodes_scored_by_the_env(math_envs, tokenizer, tmp_path):
    seen: list[AgentTask] = []

    def program(task, llm):
        seen.append(task)
        return calculator_agent.solve(task, llm)

    result = scripted_rollout(math_envs, tokenizer, AgentProgram(program), tmp_path).run([5, 6], sample_seed=0)
    assert [(e.group, e.chain) for e in result.episodes] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for episode in result.episodes:
        answer = episode.trajectory.task["answer"]
        assert episode.failure is None and episode.success and episode.reward == 1.0
        assert episode.trajectory.steps[-1].action == f"<answer>{answer}</answer>"  # scored by the env's own reward
        assert episode.calls.calls == 2 and episode.calls.rows == 1 and episode.calls.prefix_mismatches == 0
        [row] = episode.rows
        sampled = tokenizer.decode([t for t, bit in zip(row.token_ids, row.action_mask, strict=True) if bit])
        assert '"name": "calculate"' in sampled and sampled.endswith(f"{answer}<|im_end|>")
        assert episode.model_turns == 2 and episode.generated_tokens == sum(row.action_mask)
        assert episode.tool_calls == episode.calls.tool_calls == 1 and episode.summary.tool_calls == 0
    # The program gets the task's text and ids, never the gold answer.
    assert {task.seed for task in seen} == {5, 6} and all(task.tools_url is None for task in seen)
    assert all(task.prompt.startswith("Calculate ") and "answer" not in task.prompt for task in seen)
    assert len({task.id for task in seen if task.seed == 5}) == 1  # the chains of a group share the task


def test_a_failing_program_fails_its_episode_with_the_reason_and_the_group_goes_on(math_envs, tokenizer, tmp_path):
    def program(task, llm):
        return behaviours[task.seed](task, llm)

    def raises(task, llm):
        raise ValueError("the agent tripped")

    def silent(task, llm):
        return "42"

    def judge(task, llm):
        calculator_agent.solve(task, llm)
        return 0.25

    def wrong_type(task, llm):
        calculator_agent.solve(task, llm)
        return ["not", "an", "answer"]

    behaviours = {1: raises, 2: silent, 3: judge, 4: wrong_type}
    rollout = scripted_rollout(math_envs, tokenizer, AgentProgram(program, "prog"), tmp_path)
    rollout.config = msgspec.structs.replace(rollout.config, samples_per_prompt=1)
    episodes = rollout.run([1, 2, 3, 4], sample_seed=0).episodes
    raised, never_called, judged, returned_list = episodes
    assert raised.failure == "prog raised ValueError: the agent tripped" and not raised.rows
    assert never_called.failure == "prog never called the model"
    assert judged.failure is None and judged.reward == 0.25 and judged.success and len(judged.rows) == 1
    assert returned_list.failure == "prog returned list; return the answer text or a reward"
    assert len(returned_list.rows) == 1  # what it sampled is kept (reported), though the episode failed


def test_the_episode_budget_ends_a_programs_episode_unscored_and_a_prompt_past_it_fails_with_the_reason(
    math_envs, tokenizer, tmp_path
):
    """The calls get the model's context window; the episode's budget (``rollout.max_episode_tokens``) counts its rows.
    A budget the conversation outgrows ends it truncated, its answer not scored; one its first prompt outgrows fails
    it, saying which setting to raise."""
    whole = scripted_rollout(math_envs, tokenizer, AgentProgram(calculator_agent.solve), tmp_path).run([7], 0)
    tokens = len(whole.episodes[0].rows[0].token_ids)
    first_prompt = whole.episodes[0].rows[0].calls[0][0]
    expert = ScriptedGenerator(ChatFormat(tokenizer), calculator_agent.expert)
    for budget in (tokens - 1, first_prompt - 1):
        config = calculator_config(tmp_path)
        config.rollout = msgspec.structs.replace(config.rollout, max_episode_tokens=budget, samples_per_prompt=1)
        gateway = gateway_for(config, expert, tokenizer)
        program = AgentProgram(calculator_agent.solve, "calc")
        [episode] = AgentRollout(math_envs, program, gateway, config.rollout, config.agent).run([7], 0).episodes
        if budget == tokens - 1:
            assert episode.failure is None and episode.truncation_reason == "max_tokens"
            assert len(episode.rows[0].token_ids) == budget and episode.reward == 0.0
            assert episode.trajectory.steps == []  # the answer never reached the env
        else:
            assert not episode.rows
            assert episode.failure == (
                f"calc's first call was past the episode's budget (rollout.max_episode_tokens = {budget} tokens)"
            )


def test_a_program_plays_a_mix_of_envs_each_episode_scored_and_reported_by_its_own(tokenizer, tmp_path):
    """``env.mix`` with a program: each task comes from one component, the component's env scores the answer, and
    the metrics report each component."""
    data = calculator_config(tmp_path).to_dict()
    options = data["env"]["options"]
    adding = {**options, "config": {**options["config"], "operators": ["+"]}}
    data["env"] = {
        "mix": [
            {"id": "AgentFly/Math-v0", "name": "times", "options": options},
            {"id": "AgentFly/Math-v0", "name": "plus", "options": adding},
        ],
        "eval_options": {"split": "eval"},
    }
    config = Config.from_dict(data)
    config.validate(check_env=True)  # a program and a mix: accepted for training and for eval
    config.validate(check_env=True, training=False)
    envs = make_env_pool(config.env.id, config.env.options, size=8)
    try:
        expert = ScriptedGenerator(ChatFormat(tokenizer), calculator_agent.expert)
        gateway = gateway_for(config, expert, tokenizer)
        program = AgentProgram(calculator_agent.solve)
        episodes = AgentRollout(envs, program, gateway, config.rollout, config.agent).run(range(4), 0).episodes
    finally:
        run_sync(envs.close())
    by_env = {name: [e for e in episodes if e.trajectory.env_id == name] for name in ("times", "plus")}
    assert all(by_env.values()) and sum(map(len, by_env.values())) == len(episodes) == 8
    for name, operator in (("times", "*"), ("plus", "+")):
        assert all(operator in e.trajectory.observation and e.success and e.rows for e in by_env[name])
    metrics = per_env_metrics(episodes)
    assert metrics["times/episodes"] + metrics["plus/episodes"] == 8 and metrics["plus/success_rate"] == 1.0


def test_a_program_past_its_time_limit_fails_and_its_late_calls_are_refused(math_envs, tokenizer, tmp_path):
    late: list[BaseException] = []

    def slow(task, llm):
        try:  # calls on past its time limit: once the episode has ended the gateway refuses (or, the batch over, is gone)
            for _ in range(600):
                calculator_agent.solve(task, llm)
                time.sleep(0.1)
        except (openai.NotFoundError, openai.APIConnectionError) as error:
            late.append(error)

    async def slow_async(task, llm):
        await asyncio.sleep(30)

    for program in (slow, slow_async):
        rollout = scripted_rollout(math_envs, tokenizer, AgentProgram(program, "slow"), tmp_path, timeout_s=0.5)
        rollout.config = msgspec.structs.replace(rollout.config, samples_per_prompt=1)
        [episode] = rollout.run([9], sample_seed=0).episodes
        assert episode.failure == "slow ran past its time limit of 0.5 s"
    deadline = time.monotonic() + 120  # however slow a loaded machine makes its calls
    while not late and time.monotonic() < deadline:
        time.sleep(0.05)
    assert late  # a clear error, never a hang or an answer


def test_the_agent_flag_names_the_program_for_train_and_eval():
    from agentfly_train.cli import build_parser, resolve_config

    for command, argv in [("train", ["--agent", f"{EXAMPLE}:solve"]), ("eval", ["--agent", f"{EXAMPLE}:solve"])]:
        config = resolve_config(build_parser(command).parse_args(argv))
        assert config.agent.program == f"{EXAMPLE}:solve"


def test_loading_programs_names_what_is_wrong(tmp_path):
    assert AgentProgram.load(f"{EXAMPLE}:solve").function.__name__ == "solve"
    assert AgentProgram.load("calculator_agent:expert").function is calculator_agent.expert
    for spec, message in [
        ("no_colon.py", "write it as PATH.py:FUNC"),
        (f"{tmp_path}/missing.py:solve", "no file"),
        (f"{EXAMPLE}:absent", "has no function absent"),
        ("not_a_module_here:solve", "cannot import not_a_module_here"),
    ]:
        with pytest.raises(ValueError, match=message):
            AgentProgram.load(spec)
    with pytest.raises(ConfigError, match="agent.program"):
        Config.from_dict({"agent": {"program": f"{tmp_path}/missing.py:solve"}}).validate(check_model=False)
    with pytest.raises(ConfigError, match="needs agent.expert"):
        Config.from_dict({"agent": {"program": f"{EXAMPLE}:solve"}, "sft": {"expert_episodes": 2}}).validate(
            check_model=False
        )


@pytest.mark.filterwarnings("ignore:std")  # a group left with no episode: its baseline is unused
@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.integers(1, 3), min_size=8, max_size=8),
    rewards=st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=8, max_size=8),
    finished=st.lists(st.booleans(), min_size=8, max_size=8),
    estimator=st.sampled_from(["group_norm", "rloo", "reinforce_baseline", "reinforce"]),
)
def test_every_row_of_an_episode_gets_the_episodes_advantage(rows, rewards, finished, estimator):
    """Group baselines are taken over episodes, however many rows each has: each row's advantage is what its
    episode's would be as one row."""
    episode_of = torch.tensor([e for e, count in enumerate(rows) for _ in range(count)])
    mask = torch.ones(len(episode_of), 3)
    included = algorithms.trained_episodes(torch.tensor(finished)[episode_of], 4, estimator, episode_of)
    per_row = algorithms.compute_advantages(
        torch.tensor(rewards)[episode_of],
        mask,
        estimator=estimator,
        group_size=4,
        included=included,
        episode_of=episode_of,
        std_norm=False,
    )
    kept = algorithms.trained_episodes(torch.tensor(finished), 4, estimator)
    per_episode = algorithms.compute_advantages(
        torch.tensor(rewards), torch.ones(8, 3), estimator=estimator, group_size=4, included=kept, std_norm=False
    )
    assert torch.equal(included, kept[episode_of])
    # The shaped reward each row carries (before any batch-wide normalisation, which counts tokens).
    shaped_rows, shaped_episodes = per_row.token_rewards.sum(-1), per_episode.token_rewards.sum(-1)
    assert torch.allclose(shaped_rows, shaped_episodes[episode_of], atol=1e-6)


def test_a_training_step_and_an_evaluation_of_a_program(tokenizer, tmp_path):
    """The trainer's own loop with a program: its rows are trained on, its calls' counters reach metrics.jsonl,
    tokens.jsonl holds each row; evaluation plays the program too."""
    torch.set_num_threads(1)
    config = calculator_config(tmp_path / "run")
    config.train = msgspec.structs.replace(config.train, steps=1)
    config.sft = msgspec.structs.replace(config.sft, expert_episodes=0)
    config.rollout = msgspec.structs.replace(config.rollout, max_new_tokens=24, generator="transformers")
    trainer = LocalTrainer(copy.deepcopy(config), model=tiny_model(tokenizer), tokenizer=tokenizer)
    trainer.fit()
    [metrics] = read_metrics(tmp_path / "run" / METRICS_FILE)
    assert metrics["llm_calls_per_episode"] >= 1 and metrics["rows_per_episode"] >= 1
    assert 0 <= metrics["prefix_mismatch_rate"] <= 1 and metrics["gateway_latency_ms_p50"] > 0
    assert metrics["generated_tokens_per_episode"] > 0
    records = [
        msgspec.json.decode(line, type=TokenRecord)
        for line in (tmp_path / "run" / TOKENS_FILE).read_bytes().splitlines()
    ]
    assert len(records) == 4 and all(record.rows and not record.token_ids for record in records)
    assert all(sum(r.mask_runs[1::2]) == len(r.logprobs) for record in records for r in record.rows)

    summary = evaluate(config, model=trainer.policy, tokenizer=tokenizer)
    assert summary["episodes"] == 4 and summary["llm_calls_per_episode"] >= 1
    assert json.loads((tmp_path / "run" / "eval" / "summary.json").read_text())["episodes"] == 4


def test_a_training_step_and_an_evaluation_report_each_tool_a_program_called(tokenizer, tmp_path):
    """Per-tool metrics of a program's MCP tool calls: in metrics.jsonl (and so TensorBoard) and eval's summary.json."""
    torch.set_num_threads(1)
    config = calculator_config(tmp_path / "run", program=f"{MCP_PROGRAM}:solve", tools=True)
    config.env = msgspec.structs.replace(config.env, options=MCP_OPTIONS)
    config.train = msgspec.structs.replace(config.train, steps=1)
    config.sft = msgspec.structs.replace(config.sft, expert_episodes=0)
    config.rollout = msgspec.structs.replace(config.rollout, max_new_tokens=8, generator="transformers")
    trainer = LocalTrainer(copy.deepcopy(config), model=tiny_model(tokenizer), tokenizer=tokenizer)
    trainer.fit()
    [metrics] = read_metrics(tmp_path / "run" / METRICS_FILE)
    keys = {f"tool/calculator/{field}" for field in TOOL_METRICS}
    assert keys <= set(metrics), sorted(metrics)
    assert metrics["tool/calculator/calls_per_episode"] == 1.0  # one call in each of the step's 4 episodes
    assert metrics["tool/calculator/error_rate"] == metrics["tool/calculator/timeout_rate"] == 0.0
    assert 0 < metrics["tool/calculator/latency_ms_p50"] <= metrics["tool/calculator/latency_ms_p95"]

    evaluate(config, model=trainer.policy, tokenizer=tokenizer)
    summary = json.loads((tmp_path / "run" / "eval" / "summary.json").read_text())
    assert keys <= set(summary) and summary["tool/calculator/calls_per_episode"] == 1.0


def test_the_warm_start_learns_from_the_programs_own_episodes_against_its_expert(tokenizer, tmp_path):
    from agentfly_train.sft import warm_start

    config = calculator_config(tmp_path)
    config.sft = msgspec.structs.replace(config.sft, expert_episodes=4, batch_size=4)
    config.rollout = msgspec.structs.replace(config.rollout, generator="transformers")
    result = warm_start(config, tiny_model(tokenizer), tokenizer)
    assert result.episodes == 4 and len(result.losses) == 1
    # Each demonstration's model tokens: the call, then the answer, each closed by <|im_end|>.
    assert 30 < result.action_tokens / result.episodes < 60


#: A program that calls its episode's env tools over MCP.
MCP_PROGRAM = f"{REPO_ROOT}/tests/train/_mcp_calculator_program.py"
#: The agent-calculator preset's env with its calculator tool, which :data:`MCP_PROGRAM` calls.
MCP_OPTIONS = {**Config.load("agent-calculator").env.options, "tools": ["calculator"]}


@pytest.mark.parametrize("where", ["local", "ray", "mix"])
def test_a_program_uses_the_envs_own_tools_over_mcp(tokenizer, tmp_path, where, request):
    """``task.tools_url`` serves the episode's env tools: each call is a step of the episode the trainer recorded,
    with its status and wall time, wherever the env runs: in this process, in a Ray actor, as a mixture's component."""
    import _mcp_calculator_program

    options = MCP_OPTIONS
    if where == "ray":
        request.getfixturevalue("ray_cluster")
        envs = make_env_pool("AgentFly/Math-v0", options, backend="ray", size=2, ray_options={"num_cpus": 0})
    elif where == "mix":
        component = {"id": "AgentFly/Math-v0", "name": "math", "options": options, "weight": 1.0}
        envs = make_env_pool("AgentFly/Mix-v0", {"envs": [component]}, size=2)
    else:
        envs = make_env_pool("AgentFly/Math-v0", options, size=2)
    try:
        program = AgentProgram(_mcp_calculator_program.solve, "mcp")
        rollout = scripted_rollout(envs, tokenizer, program, tmp_path, tools=True)
        rollout.config = msgspec.structs.replace(rollout.config, samples_per_prompt=1)
        episodes = rollout.run([3, 4], sample_seed=0).episodes
    finally:
        run_sync(envs.close())
    for episode in episodes:
        assert episode.failure is None and episode.success, episode.failure
        called, answered = episode.trajectory.steps
        assert called.tool_calls[0].name == "calculator" and called.observation == episode.trajectory.task["answer"]
        assert answered.action == f"<answer>{episode.trajectory.task['answer']}</answer>"
        assert episode.summary.tool_calls == 1 and episode.tool_calls == 0  # the program called it, not the model
        [result] = called.tool_results
        assert result.status == "ok" and result.duration_s > 0
    metrics = episode_metrics(episodes)
    assert metrics["tool/calculator/calls_per_episode"] == 1.0 and metrics["tool/calculator/error_rate"] == 0.0
    assert 0 < metrics["tool/calculator/latency_ms_p50"] <= metrics["tool/calculator/latency_ms_p95"]


COMMAND = f"{sys.executable} {REPO_ROOT}/examples/calculator_agent_command.py"


def test_an_agent_command_plays_token_exact_episodes_as_the_function_does(math_envs, tokenizer, tmp_path):
    command = AgentCommand(COMMAND)
    result = scripted_rollout(math_envs, tokenizer, command, tmp_path).run([5, 6], sample_seed=0)
    for episode in result.episodes:
        answer = episode.trajectory.task["answer"]
        assert episode.failure is None and episode.success and episode.reward == 1.0
        assert episode.trajectory.steps[-1].action == f"<answer>{answer}</answer>"
        assert episode.calls.calls == 2 and episode.calls.rows == 1 and episode.calls.prefix_mismatches == 0


def write_script(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("import os, sys, time, subprocess\n" + body)
    return f"{sys.executable} {path}"


def test_an_agent_command_gets_its_endpoints_and_task_and_fails_with_the_reason(math_envs, tokenizer, tmp_path):
    """Its environment and stdin; a failing, silent or slow command (and what it started) is ended, its reason kept."""
    echo = write_script(
        tmp_path,
        "echo.py",
        "import json, openai\n"
        "names = ['OPENAI_BASE_URL', 'ANTHROPIC_BASE_URL', 'AGENTFLY_TASK_ID', 'AGENTFLY_TASK_SEED', 'OPENAI_MODEL']\n"
        "print(json.dumps({name: os.environ[name] for name in names} | {'stdin': sys.stdin.read()}), file=sys.stderr)\n"
        "client = openai.OpenAI(max_retries=0)\n"  # from OPENAI_BASE_URL and OPENAI_API_KEY alone
        "client.chat.completions.create(model=os.environ['OPENAI_MODEL'], messages=[{'role': 'user', 'content': 'hi'}])\n"
        "print('thinking...')\nprint('  0.75  ')\nprint()\n",
    )
    rollout = scripted_rollout(math_envs, tokenizer, AgentCommand(echo, returns="reward"), tmp_path)
    rollout.config = msgspec.structs.replace(rollout.config, samples_per_prompt=1)
    [judged] = rollout.run([3], sample_seed=0).episodes
    assert judged.failure is None and judged.reward == 0.75 and len(judged.rows) == 1

    marker = tmp_path / "child.pid"
    behaviours = {
        "crash.py": (
            "sys.stdin.read()\nprint('half way')\nprint('bad things', file=sys.stderr)\nsys.exit(3)\n",
            "exited with code 3; stderr ends: bad things",
        ),
        "silent.py": ("pass\n", "printed no answer"),
        "not_a_number.py": ("print('many')\n", "printed 'many' as its reward, not a number"),
        "slow.py": (
            f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            f"open({str(marker)!r}, 'w').write(str(child.pid))\ntime.sleep(60)\n",
            "ran past its time limit of 5 s",
        ),
    }
    for name, (body, reason) in behaviours.items():
        command = AgentCommand(write_script(tmp_path, name, body), returns="reward")
        rollout = scripted_rollout(math_envs, tokenizer, command, tmp_path, timeout_s=5.0)
        rollout.config = msgspec.structs.replace(rollout.config, samples_per_prompt=1)
        [episode] = rollout.run([4], sample_seed=0).episodes
        assert episode.failure == f"{command.name} {reason}", episode.failure
    child = int(marker.read_text())
    for _ in range(100):  # the group was killed: its child too (reaped by init soon after)
        if not os.path.exists(f"/proc/{child}") or open(f"/proc/{child}/stat").read().split()[2] == "Z":
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the command's child {child} outlived its episode")
    missing = AgentCommand("no-such-agent-binary --flag")
    rollout = scripted_rollout(math_envs, tokenizer, missing, tmp_path)
    rollout.config = msgspec.structs.replace(rollout.config, samples_per_prompt=1)
    [episode] = rollout.run([4], sample_seed=0).episodes
    assert episode.failure.startswith("no-such-agent-binary --flag could not start")


def test_a_terminated_run_leaves_no_agent_command_running(tmp_path, smollm2_dir):
    """Each agent command runs in a process group of its own, which a signal to the trainer does not reach:
    ``agentfly-train`` killed with SIGTERM kills them on its way out."""
    pid_file = tmp_path / "agent.pid"
    script = write_script(
        tmp_path,
        "sleeper.py",
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n",
    )
    argv = [
        str(Path(sys.executable).with_name("agentfly-train")),
        "eval",
        "--config",
        "agent-calculator",
        "--agent-command",
        script,
        "--episodes",
        "1",
        "--set",
        'rollout.generator="transformers"',
        "--out",
        str(tmp_path / "run"),
    ]
    environment = {**os.environ, "AGENTFLY_MODEL_CACHE": str(Path(smollm2_dir).parent)}
    trainer = subprocess.Popen(argv, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 600  # the model loads first, however slowly a loaded machine does it
        while not pid_file.exists() or not pid_file.read_text():
            assert trainer.poll() is None and time.monotonic() < deadline, trainer.stderr.read().decode()[-2000:]
            time.sleep(0.2)
        agent = int(pid_file.read_text())
        trainer.send_signal(signal.SIGTERM)
        assert trainer.wait(timeout=120) == 128 + signal.SIGTERM
    finally:
        trainer.kill()
    deadline = time.monotonic() + 60
    while _running(agent):
        assert time.monotonic() < deadline, f"agent command {agent} outlived its trainer"
        time.sleep(0.1)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, killed and waiting for its parent to reap it, is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_the_agent_command_flag_and_one_agent_at_a_time():
    from agentfly_train.cli import build_parser, resolve_config

    for command in ("train", "eval"):
        config = resolve_config(build_parser(command).parse_args(["--agent-command", COMMAND]))
        assert config.agent.command == COMMAND and config.agent.plays and not config.agent.program
    # A flag names the run's agent, whichever kind the preset had.
    commanded = resolve_config(
        build_parser("eval").parse_args(["--config", "agent-calculator", "--agent-command", COMMAND])
    )
    assert (commanded.agent.command, commanded.agent.program) == (COMMAND, "")
    commanded.validate(check_env=False, check_model=False, training=False)
    program = resolve_config(
        build_parser("train").parse_args(["--set", f'agent.command="{COMMAND}"', "--agent", "m:f"])
    )
    assert (program.agent.program, program.agent.command) == ("m:f", COMMAND)  # --set is the last word
    program = resolve_config(
        build_parser("train").parse_args(["--config", "agent-calculator-responses", "--agent", "m:f"])
    )
    assert (program.agent.program, program.agent.command) == ("m:f", "")
    both = resolve_config(build_parser("train").parse_args(["--agent-command", COMMAND, "--agent", f"{EXAMPLE}:solve"]))
    with pytest.raises(ConfigError, match="two agents"):
        both.validate(check_env=False, check_model=False)


def test_each_failed_episodes_reason_reaches_the_metrics_the_trajectories_and_the_viewer(tokenizer, tmp_path):
    """An evaluation of a program that fails on some tasks: summary.json counts each reason, trajectories.jsonl and
    the viewer's episode list and page carry it."""
    from starlette.testclient import TestClient

    from agentfly_view.app import create_app
    from agentfly_view.runs import RunDir

    program = tmp_path / "picky.py"
    program.write_text(
        f"import sys\nsys.path.insert(0, {str(REPO_ROOT / 'examples')!r})\nimport calculator_agent\n\n"
        "def solve(task, llm):\n"
        "    if task.seed % 2:\n"
        "        raise RuntimeError('odd seeds are not my job')\n"
        "    return calculator_agent.solve(task, llm)\n"
    )
    config = calculator_config(tmp_path / "run", program=f"{program}:solve")
    config.rollout = msgspec.structs.replace(config.rollout, max_new_tokens=8, generator="transformers")
    summary = evaluate(config, model=tiny_model(tokenizer), tokenizer=tokenizer)
    reason = f"{program}:solve raised RuntimeError: odd seeds are not my job"
    assert summary["failed_episodes"] == 2 and summary["failure_reasons"] == {reason: 2}
    written = [json.loads(line) for line in open(summary["trajectories"])]
    assert [t.get("failure") for t in written] == [None, reason, None, reason]
    client = TestClient(create_app([RunDir(tmp_path / "run")]), base_url="http://127.0.0.1")
    rows = client.get("/api/episodes", params={"source": "eval"}).json()["rows"]
    assert [row["outcome"] for row in rows][1::2] == ["failed", "failed"]
    assert client.get("/api/episode", params={"source": "eval", "index": 1}).json()["trajectory"]["failure"] == reason


def test_a_steps_line_on_the_console_counts_each_failure_reason():
    from io import StringIO

    from rich.console import Console

    from agentfly_train.console import StepReport

    out = StringIO()
    metrics = {
        "reward_mean": 0.5,
        "success_rate": 0.5,
        "tool_calls_per_episode": 1.0,
        "rollout_wall_s": 1.0,
        "update_s": 1.0,
    }
    reasons = {"prog raised ValueError: no": 2, "prog never called the model": 1}
    StepReport(Console(file=out, width=400), 3, bar=False)(
        1, {**metrics, "left_out_episodes": 3, "failure_reasons": reasons}
    )
    assert "3 episodes left out of the update" in out.getvalue()
    assert "failed: 2 x prog raised ValueError: no; 1 x prog never called the model" in out.getvalue()


def test_eval_of_a_program_on_a_training_preset_ignores_what_only_training_uses():
    """The calculator preset warm-starts the env loop; an evaluation of a program on it never warm-starts."""
    from agentfly_train.cli import build_parser, resolve_config

    config = resolve_config(build_parser("eval").parse_args(["--config", "calculator", "--agent", f"{EXAMPLE}:solve"]))
    assert config.sft.expert_episodes and not config.agent.expert
    config.validate(check_model=False, training=False)
    with pytest.raises(ConfigError, match="agent.expert"):  # training it would warm-start, which needs the expert
        config.validate(check_model=False)


def test_relative_paths_in_a_config_file_are_the_files_own(tmp_path, monkeypatch):
    """A config's agent and demonstration files are found from any working directory, through ``extends`` too."""
    project = tmp_path / "project"
    (project / "configs").mkdir(parents=True)
    (project / "agent.py").write_text("def solve(task, llm):\n    return '1'\n")
    (project / "configs" / "base.toml").write_text(
        'extends = "agent-calculator"\n[agent]\nprogram = "../agent.py:solve"\n[sft]\ndata = ["../demos.jsonl"]\n'
    )
    (project / "configs" / "mine.toml").write_text(
        'extends = "base.toml"\n[agent]\nexpert = "calculator_agent:expert"\n'
    )
    monkeypatch.chdir(tmp_path)
    config = Config.load(str(project / "configs" / "mine.toml"))
    assert config.agent.program == f"{project / 'agent.py'}:solve"
    assert config.sft.data == [str(project / "demos.jsonl")]
    assert config.agent.expert == "calculator_agent:expert"  # a module, not a path: as written
    assert Config.load("agent-calculator").agent.program == f"{REPO_ROOT / 'examples' / 'calculator_agent.py'}:solve"
