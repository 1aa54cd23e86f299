"""``agentfly-train --backend openrlhf --agent PATH.py:FUNC`` (and ``--agent-command CMD``): the command names the
agent file the launcher writes, which binds the program executor to the settings file beside it, the program
reaches the rollout actors in that file's ``agent``, and OpenRLHF 0.11.2's own parser accepts the command
(:func:`test_openrlhf_launcher.openrlhf_parse` runs its ``__main__`` block as written)."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path

import pytest
from serving import REPO_ROOT
from test_openrlhf_launcher import MODEL, entry_args, launcher_for, openrlhf_parse

from agentfly_train.backends import BACKENDS
from agentfly_train.backends.openrlhf import executor
from agentfly_train.backends.openrlhf.launcher import ENTRY_MODULE
from agentfly_train.backends.openrlhf.program_executor import ProgramExecutor
from agentfly_train.backends.openrlhf.settings import SETTINGS_FILE, Settings
from agentfly_train.cli import main
from agentfly_train.config import Config, ConfigError

COMMAND = f"{sys.executable} {REPO_ROOT}/examples/calculator_agent_command.py"


def built_executor(agent_file: str):
    """``AgentExecutor()`` of the agent file, loaded by path as OpenRLHF's ``_load_agent_executor`` loads it."""
    spec = importlib.util.spec_from_file_location("agent_module", agent_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.AgentExecutor()


def dry_run(capsys, tmp_path, *flags: str) -> tuple[dict[str, str], list[str]]:
    """``agentfly-train --backend openrlhf --dry-run FLAGS``: the variables in front of the printed line, and the
    command after them."""
    code = main(["--backend", "openrlhf", "--dry-run", "--out", str(tmp_path / "run"), "--model", MODEL, *flags])
    assert code == 0
    words = shlex.split(capsys.readouterr().out.strip().splitlines()[-1])
    split = words.index(sys.executable)
    return dict(word.split("=", 1) for word in words[:split]), words[split:]


def test_a_program_from_the_command_line_reaches_the_actors_by_absolute_path(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # the program's path is relative to where the command runs
    env, argv = dry_run(capsys, tmp_path, "--agent", "examples/calculator_agent.py:solve", "--set", "agent.tools=false")
    assert env == {} and argv[:3] == [sys.executable, "-m", ENTRY_MODULE]
    args = openrlhf_parse(argv[3:])
    agent_file = Path(args.train.agent_func_path)
    assert agent_file == tmp_path / "run" / "openrlhf" / "agentfly_agent.py" and agent_file.is_file()
    settings = Settings.read(agent_file.with_name(SETTINGS_FILE))
    agent = settings.agent
    assert agent.program == f"{REPO_ROOT}/examples/calculator_agent.py:solve" and agent.tools is False
    assert agent.expert == ""  # the warm start's expert stays here
    assert settings.pool == "ray"  # the env loop's settings travel as they do without a program
    # What a rollout actor builds from the agent file, anywhere: the example's function.
    monkeypatch.chdir(tmp_path)
    built = built_executor(str(agent_file))
    assert isinstance(built, ProgramExecutor) and built.settings == settings
    assert built.agent.function.__name__ == "solve"


def test_an_agent_command_reaches_the_actors_as_written(tmp_path, capsys):
    env, argv = dry_run(capsys, tmp_path, "--agent-command", COMMAND, "--set", "agent.timeout_s=30")
    agent_file = openrlhf_parse(argv[3:]).train.agent_func_path
    agent = Settings.read(Path(agent_file).with_name(SETTINGS_FILE)).agent
    assert (agent.command, agent.program, agent.timeout_s) == (COMMAND, "", 30)
    assert built_executor(agent_file).agent.argv == shlex.split(COMMAND)


def test_without_a_program_the_env_loop_plugin_runs(tmp_path):
    launcher = launcher_for(tmp_path)
    assert openrlhf_parse(entry_args(launcher.argv)).train.agent_func_path == str(launcher.agent_file)
    assert not launcher.settings.agent.plays and Settings.read(launcher.job_dir / SETTINGS_FILE) == launcher.settings
    built = built_executor(str(launcher.agent_file))
    assert isinstance(built, executor.AgentExecutor) and not any(name.startswith("AGENTFLY_") for name in launcher.env)


def test_a_submitted_program_job_names_the_plugin_in_its_working_dir(tmp_path):
    example = f"{REPO_ROOT}/examples/calculator_agent.py:solve"
    cluster = {"ray_address": "http://head:8265", "cluster_out_dir": "/shared/run"}
    launcher = launcher_for(tmp_path, agent={"program": example}, openrlhf=cluster)
    args = openrlhf_parse(entry_args(launcher.argv))
    assert args.train.agent_func_path == "agentfly_agent.py"
    assert (launcher.job_dir / args.train.agent_func_path).is_file()
    assert Settings.read(launcher.job_dir / SETTINGS_FILE).agent.program == example
    assert launcher.runtime_env["env_vars"] == {}


def test_the_launcher_notes_what_a_program_run_does_not_carry(tmp_path):
    launcher = launcher_for(tmp_path, agent={"command": COMMAND}, rollout={"stop": ["</answer>"]})
    notes = "\n".join(launcher.notes)
    assert "not carried (OpenRLHF's agent loop has no such setting): rollout.stop" in notes
    assert f"agent: {COMMAND} plays every episode, in each vLLM engine's process" in notes
    assert "rollout.stop" not in "\n".join(launcher_for(tmp_path, rollout={"stop": ["</answer>"]}).notes)


def test_a_backend_that_knows_no_agents_refuses_one(monkeypatch):
    program = {"program": f"{REPO_ROOT}/examples/calculator_agent.py:solve"}
    Config.from_dict({"backend": "openrlhf", "agent": program}).validate(check_model=False)
    monkeypatch.setitem(BACKENDS, "elsewhere", BACKENDS["local"])
    with pytest.raises(ConfigError, match="runs on the local or the openrlhf backend; got 'elsewhere'"):
        Config.from_dict({"backend": "elsewhere", "agent": program}).validate(check_model=False)
