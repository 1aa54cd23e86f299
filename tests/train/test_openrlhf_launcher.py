"""``agentfly-train --backend openrlhf``: every command the launcher builds is one OpenRLHF 0.11.2 accepts.

OpenRLHF's parser is built inside ``if __name__ == "__main__":`` of ``openrlhf/cli/train_ppo_ray.py``,
next to its validation block (asserts and fix-ups). :func:`openrlhf_parse` runs that block as written,
taken from the installed file with ``ast``, with ``train`` replaced by a function that keeps the parsed
args; the module's top-level imports (Ray actors, vLLM, DeepSpeed) are not executed, so no stand-in
modules are needed. A submitted command also goes through ``ray job submit``'s own click parser and the
way Ray joins an entrypoint for a shell.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from subprocess import list2cmdline
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from agentfly_train.backends import backend_class
from agentfly_train.backends.openrlhf.launcher import ENTRY_MODULE, PACKAGES, OpenRLHFLauncher, core_requirements
from agentfly_train.backends.openrlhf.settings import AGENT_FILE_NAME, SETTINGS_FILE, Settings
from agentfly_train.cli import main
from agentfly_train.config import ALGORITHMS, Config, ConfigError, apply_overrides

OPENRLHF_CLI = Path(importlib.util.find_spec("openrlhf.cli.train_ppo_ray").origin)
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"  # a hub id: passed through untouched, never fetched


def _main_block() -> Any:
    """The module's standard-library imports, then its ``__main__`` block (its other imports need GPUs)."""
    tree = ast.parse(OPENRLHF_CLI.read_text())
    imports = [
        node
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        and all(
            name.split(".")[0] in sys.stdlib_module_names
            for name in ([node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names])
        )
    ]
    block = next(node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test))
    return compile(ast.Module(body=[*imports, *block.body], type_ignores=[]), str(OPENRLHF_CLI), "exec")


MAIN_BLOCK = _main_block()


def openrlhf_parse(argv: list[str]) -> SimpleNamespace:
    """``argv`` (the arguments after ``-m openrlhf.cli.train_ppo_ray``) through OpenRLHF's parser and checks."""
    kept: list[SimpleNamespace] = []
    namespace = {"__name__": "__main__", "train": kept.append}
    saved, sys.argv = sys.argv, ["train_ppo_ray.py", *argv]
    try:
        exec(MAIN_BLOCK, namespace)  # noqa: S102 - OpenRLHF's own code, from the installed package
    finally:
        sys.argv = saved
    assert len(kept) == 1, "OpenRLHF's main block did not reach train()"
    return kept[0]


def launcher_for(tmp_path: Path, overrides: list[str] = (), **data: Any) -> OpenRLHFLauncher:
    """A dry-run launcher (prompt files exported under ``tmp_path/run dir``: a path with a space)."""
    config = Config.from_dict(
        {
            "backend": "openrlhf",
            "out_dir": str(tmp_path / "run dir"),
            "model": {"path": MODEL},
            "train": {"steps": 2},
            **data,
        }
    )
    return OpenRLHFLauncher(apply_overrides(config, list(overrides)).validate(check_model=False), dry_run=True)


def entry_args(argv: list[str]) -> list[str]:
    return argv[argv.index(ENTRY_MODULE) + 1 :]


def lines(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


# ----------------------------------------------------------------------------- commands OpenRLHF accepts


@pytest.mark.parametrize("algo", [name for name, algo in ALGORITHMS.items() if not algo.step_credit])
def test_every_algorithm_is_accepted_by_openrlhf(tmp_path, algo):
    launcher = launcher_for(tmp_path, algo=algo)
    assert launcher.argv[:3] == [sys.executable, "-m", ENTRY_MODULE] and launcher.runtime_env is None
    args = openrlhf_parse(entry_args(launcher.argv))
    assert args.algo.advantage.estimator == ALGORITHMS[algo].estimator
    assert args.rollout.n_samples_per_prompt == 4 and args.rollout.batch_size == 8
    assert args.actor.model_name_or_path == MODEL
    agent_file = tmp_path / "run dir" / "openrlhf" / AGENT_FILE_NAME
    assert args.train.agent_func_path == str(agent_file) and agent_file.is_file()
    assert args.reward.remote_url == ["agent"]  # OpenRLHF's mark for an agent plug-in: no reward model
    # ppo trains a critic, which OpenRLHF makes from the policy; the other estimators have none.
    assert args.critic.model_name_or_path == (MODEL if algo == "ppo" else None)
    assert (args.data.input_key, args.data.label_key, args.data.apply_chat_template) == ("prompt", "label", True)
    assert (args.data.max_len, args.rollout.max_new_tokens, args.rollout.temperature) == (2048, 256, 1.0)
    assert (args.algo.kl.init_coef, args.algo.kl.use_loss) == (0.01, algo == "grpo")
    assert args.algo.kl.estimator == ("k3" if algo == "grpo" else "k1")
    assert list(args.actor.eps_clip_low_high) == [0.2, 0.2] and list(args.reward.clip_range) == [-10.0, 10.0]
    assert (args.actor.adam.lr, args.train.batch_size, args.train.micro_batch_size, args.train.seed) == (1e-6, 32, 4, 0)
    assert (args.train.colocate_all, args.vllm.enable_sleep, args.ds.enable_sleep) == (True, True, True)
    assert (args.vllm.num_engines, args.actor.num_gpus_per_node, args.ds.zero_stage) == (8, 8, 3)
    run = tmp_path / "run dir"
    assert args.ckpt.path == f"{run}/checkpoints" and args.ckpt.output_dir == f"{run}/final"
    assert args.logger.tensorboard_dir == f"{run}/tensorboard" and args.eval.dataset is None
    rows = lines(args.data.prompt_dataset)  # the file OpenRLHF reads: train.steps x prompts_per_step tasks
    assert Path(args.data.prompt_dataset) == run / "openrlhf" / "train.jsonl" and len(rows) == 2 * 8
    assert [m["role"] for m in rows[0]["prompt"]][-1] == "user"
    assert [json.loads(row["label"])["seed"] for row in rows] == list(range(16))


@pytest.mark.parametrize(
    ("overrides", "check"),
    [
        # Separate GPUs for vLLM (2 engines x 2), the actor (2 nodes x 4) and PPO's critic (1 x 4).
        (
            [
                'algo="ppo"',
                'openrlhf.colocate="none"',
                "openrlhf.vllm_engines=2",
                "openrlhf.vllm_tensor_parallel=2",
                "openrlhf.num_nodes=2",
                "openrlhf.gpus_per_node=4",
                "openrlhf.critic_num_nodes=1",
                "rollout.prompts_per_step=16",
            ],
            lambda a: (
                (
                    a.train.colocate_all,
                    a.train.colocate_actor_ref,
                    a.vllm.enable_sleep,
                    a.vllm.tensor_parallel_size,
                    a.actor.num_nodes,
                    a.critic.num_nodes,
                    a.critic.num_gpus_per_node,
                    a.ref.num_nodes,
                )
                == (False, False, False, 2, 2, 1, 4, 2)
            ),
        ),
        # Async: vLLM ahead of training on GPUs of its own, actor and reference sharing theirs.
        (
            [
                'openrlhf.colocate="actor-ref"',
                "openrlhf.async_train=true",
                "openrlhf.async_queue_size=2",
                "openrlhf.vllm_engines=4",
            ],
            lambda a: (
                (a.train.async_enable, a.train.async_queue_size, a.train.colocate_actor_ref, a.vllm.enable_sleep)
                == (True, 2, True, False)
            ),
        ),
        # PPO with both pairs colocated: the (unused) reward layout follows the critic's, as OpenRLHF checks.
        (
            ['algo="ppo"', 'openrlhf.colocate="actor-ref+critic-reward"', "openrlhf.critic_gpus_per_node=4"],
            lambda a: (
                (a.train.colocate_critic_reward, a.reward.num_gpus_per_node, a.critic.num_gpus_per_node) == (True, 4, 4)
            ),
        ),
        # Raw arguments come last and win.
        (
            ['openrlhf.extra_args=["--ds.adam_offload", "--actor.lr_scheduler", "cosine_with_min_lr"]'],
            lambda a: (a.ds.adam_offload, a.actor.lr_scheduler) == (True, "cosine_with_min_lr"),
        ),
        (['train.resume="auto"'], lambda a: a.ckpt.load_enable and a.ckpt.path.endswith("run dir/checkpoints")),
        (['train.resume="/ckpt/old run"'], lambda a: (a.ckpt.load_enable, a.ckpt.path) == (True, "/ckpt/old run")),
        # No value clip in our config is an unbounded one in OpenRLHF's (its flag cannot be unset).
        (
            ['algo="ppo"', "algorithm.value_clip=0", "algorithm.dual_clip=3", "algorithm.advantage_std_norm=false"],
            lambda a: (a.critic.value_clip, a.actor.dual_clip, a.algo.advantage.no_std_norm) == (math.inf, 3.0, True),
        ),
        (
            [
                'algo="rloo"',
                "algorithm.kl_coef=0",
                "algorithm.clip_eps_high=0.28",
                'algorithm.loss_agg="seq-mean-token-mean"',
                "rollout.top_p=0.9",
                "rollout.max_episode_tokens=4096",
                "train.gradient_checkpointing=true",
                "train.epochs=2",
                "openrlhf.vllm_prefix_caching=false",
                "openrlhf.packing=false",
                'openrlhf.param_dtype="fp16"',
                "seed=7",
            ],
            lambda a: (
                (
                    a.algo.kl.init_coef,
                    list(a.actor.eps_clip_low_high),
                    a.actor.loss_agg_mode,
                    a.rollout.top_p,
                    a.data.max_len,
                    a.actor.gradient_checkpointing_enable,
                    a.train.max_epochs,
                    a.vllm.enable_prefix_caching,
                    a.ds.packing_samples,
                    a.ds.param_dtype,
                    a.train.seed,
                )
                == (0.0, [0.2, 0.28], "seq-mean-token-mean", 0.9, 4096, True, 2, False, False, "fp16", 7)
            ),
        ),
    ],
    ids=["separate-gpus", "async", "ppo-pairs", "extra-args", "resume-auto", "resume-path", "ppo-clips", "fields"],
)
def test_layouts_and_fields_reach_openrlhf(tmp_path, overrides, check):
    args = openrlhf_parse(entry_args(launcher_for(tmp_path, overrides).argv))
    assert check(args)


def test_eval_split_is_exported_and_scheduled(tmp_path):
    launcher = launcher_for(tmp_path, ["openrlhf.eval_every=5", "eval.episodes=6", "eval.temperature=0.0"])
    args = openrlhf_parse(entry_args(launcher.argv))
    assert (args.eval.steps, args.eval.temperature, args.eval.n_samples_per_prompt) == (5, 0.0, 1)
    train_rows, eval_rows = lines(args.data.prompt_dataset), lines(args.eval.dataset)
    assert len(eval_rows) == 6 and json.loads(eval_rows[0]["label"])["options"]["split"] == "eval"
    assert "split" not in json.loads(train_rows[0]["label"])["options"]
    assert "6 eval prompts" in launcher.notes[0]


def test_warmup_and_steps_match_the_local_schedule(tmp_path):
    launcher = launcher_for(
        tmp_path,
        [
            "train.steps=10",
            "rollout.prompts_per_step=16",
            "train.warmup_steps=3",
            "train.mini_batch_size=32",
            "train.epochs=2",
        ],
    )
    args = openrlhf_parse(entry_args(launcher.argv))
    # OpenRLHF's optimizer steps (ppo_trainer.prepare_datasets) and its warm-up (ceil(steps x ratio)).
    prompts = len(lines(args.data.prompt_dataset))
    max_steps = (
        prompts
        * args.rollout.n_samples_per_prompt
        // args.train.batch_size
        * args.train.num_episodes
        * args.train.max_epochs
    )
    assert (prompts, max_steps) == (160, 10 * 2 * 2)
    assert math.ceil(max_steps * args.actor.lr_warmup_ratio) == 3 and args.actor.lr_scheduler == "constant_with_warmup"


# ----------------------------------------------------------------------------- submitting to a cluster


def submitted(tmp_path: Path, overrides: list[str] = ()) -> tuple[OpenRLHFLauncher, dict[str, Any]]:
    """A submit-mode launcher and its ``ray job submit`` arguments as Ray's own click parser reads them."""
    from ray.dashboard.modules.job.cli import submit

    launcher = launcher_for(
        tmp_path, ['openrlhf.ray_address="http://head:8265"', 'openrlhf.cluster_out_dir="/shared/runs/x"', *overrides]
    )
    assert launcher.argv[1:3] == ["job", "submit"]
    params = submit.make_context("submit", launcher.argv[3:]).params
    return launcher, params


def test_submit_command_passes_through_ray_job_submit(tmp_path):
    launcher, params = submitted(tmp_path, ['openrlhf.submit_args=["--no-wait"]', "openrlhf.eval_every=2"])
    assert params["address"] == "http://head:8265" and params["no_wait"] is True
    entry = list(params["entrypoint"])
    # Ray joins the entrypoint with list2cmdline and runs it with /bin/sh: the words must come back unchanged.
    assert shlex.split(list2cmdline(entry)) == entry
    assert entry[:3] == ["python3", "-m", ENTRY_MODULE]
    args = openrlhf_parse(entry[3:])
    runtime_env = json.loads(params["runtime_env_json"])
    job_dir = Path(runtime_env["working_dir"])
    assert job_dir == tmp_path / "run dir" / "openrlhf" and runtime_env["env_vars"] == launcher.env == {}
    # Paths are relative to the working dir, which is every worker's cwd on the cluster.
    assert args.train.agent_func_path == AGENT_FILE_NAME and (job_dir / AGENT_FILE_NAME) == launcher.agent_file
    assert Settings.read(job_dir / SETTINGS_FILE) == launcher.settings
    assert len(lines(job_dir / args.data.prompt_dataset)) == 16 and len(lines(job_dir / args.eval.dataset)) == 64
    assert (
        args.ckpt.path == "/shared/runs/x/checkpoints" and args.logger.tensorboard_dir == "/shared/runs/x/tensorboard"
    )
    assert sorted(p.name for p in job_dir.iterdir() if p.is_symlink()) == sorted(PACKAGES)
    assert (
        job_dir / "agentfly_envs" / "math"
    ).is_dir()  # agentfly_envs lives in envs/ here: linked under its import name
    assert runtime_env["pip"] == core_requirements() and "gymnasium==1.4.0" in runtime_env["pip"]
    assert not any("extra" in requirement or "vllm" in requirement for requirement in runtime_env["pip"])


def test_runtime_env_overrides_merge(tmp_path):
    _, params = submitted(
        tmp_path,
        [
            "openrlhf.requirements=false",
            "openrlhf.env_vars={OMP_NUM_THREADS = 4}",
            'openrlhf.runtime_env={env_vars = {NCCL_DEBUG = "INFO"}, pip = ["extra-pkg==1.0"]}',
        ],
    )
    runtime_env = json.loads(params["runtime_env_json"])
    assert runtime_env["pip"] == ["extra-pkg==1.0"]
    assert runtime_env["env_vars"] == {"OMP_NUM_THREADS": "4", "NCCL_DEBUG": "INFO"}


def test_submit_rejects_words_ray_would_mangle(tmp_path):
    # The default cluster_out_dir is out_dir, which has a space here: Ray's shell join would split it.
    config = Config.from_dict(
        {
            "backend": "openrlhf",
            "out_dir": str(tmp_path / "run dir"),
            "model": {"path": MODEL},
            "openrlhf": {"ray_address": "http://head:8265"},
        }
    )
    with pytest.raises(ConfigError, match="cannot pass through `ray job submit`.*cluster_out_dir"):
        OpenRLHFLauncher(config, dry_run=True)


PROBE = """
import json, os, sys, ray
runtime_env = json.loads(sys.argv[1])
ray.init(address="local", num_cpus=1, include_dashboard=False, runtime_env=runtime_env, logging_level="ERROR")

@ray.remote
def probe(agent_file, data):
    import importlib.util, msgspec
    import agentfly_envs, agentfly_train.backends.openrlhf as plugin
    spec = importlib.util.spec_from_file_location("agent_module", agent_file)  # as OpenRLHF's _load_agent_executor
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    executor = module.AgentExecutor()
    return {"cwd": os.getcwd(), "envs": agentfly_envs.__file__, "plugin": plugin.__file__, "agent": os.path.isfile(agent_file),
            "rows": sum(1 for _ in open(data)), "env": {k: v for k, v in os.environ.items() if k.startswith("AGENTFLY_")},
            "settings": msgspec.to_builtins(executor.settings), "executor": sys.modules[type(executor).__mro__[1].__module__].__file__}

print(json.dumps(ray.get(probe.remote(sys.argv[2], sys.argv[3]))))
ray.shutdown()
"""


def test_a_submitted_job_runs_the_shipped_code_from_its_working_dir(tmp_path):
    """Ray itself packages the job dir (following the links) and runs a task in it, as on a cluster."""
    launcher, params = submitted(tmp_path, ["openrlhf.requirements=false"])  # pip installs are the cluster's business
    args = openrlhf_parse(list(params["entrypoint"])[3:])
    run = subprocess.run(
        [sys.executable, "-c", PROBE, params["runtime_env_json"], args.train.agent_func_path, args.data.prompt_dataset],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["agent"] and seen["rows"] == 16 and seen["env"] == {}
    # The agent file builds the executor with the settings file the job carries beside it.
    assert seen["settings"] == json.loads(msgspec.json.encode(launcher.settings)) and seen["settings"]["pool"] == "ray"
    # The imports resolve to the uploaded copy in the worker's cwd, not to this checkout.
    assert all(seen[name].startswith(seen["cwd"]) for name in ("envs", "plugin", "executor"))
    assert not seen["cwd"].startswith(str(tmp_path))


# ----------------------------------------------------------------------------- the CLI, quoting, errors


def test_cli_dry_run_prints_one_shell_line_openrlhf_accepts(tmp_path, capsys):
    out = tmp_path / "it's a run"
    code = main(
        [
            "--backend",
            "openrlhf",
            "--dry-run",
            "--out",
            str(out),
            "--model",
            MODEL,
            "--algo",
            "rloo",
            "--samples-per-prompt",
            "8",
            "--steps",
            "3",
            "--lr",
            "2e-6",
            "--set",
            "openrlhf.env_pool_size=4",
            "--set",
            'openrlhf.env_vars={NOTE = "a b"}',
        ]
    )
    printed = capsys.readouterr().out.strip().splitlines()
    assert code == 0 and all(line.startswith("# ") for line in printed[:-1])
    words = shlex.split(printed[-1])
    assert words[0] == "NOTE=a b"  # only openrlhf.env_vars: the plug-in's settings are in a file
    assert words[1:4] == [sys.executable, "-m", ENTRY_MODULE]
    args = openrlhf_parse(words[4:])
    settings_file = out / "openrlhf" / SETTINGS_FILE
    assert args.train.agent_func_path == str(out / "openrlhf" / AGENT_FILE_NAME)
    assert Settings.read(settings_file).pool_size == 4
    assert any(
        line.startswith(f"# plug-in: {args.train.agent_func_path}") and str(settings_file) in line for line in printed
    )
    assert (args.algo.advantage.estimator, args.rollout.n_samples_per_prompt, args.actor.adam.lr) == ("rloo", 8, 2e-6)
    assert (
        Path(args.data.prompt_dataset) == out / "openrlhf" / "train.jsonl"
        and len(lines(args.data.prompt_dataset)) == 24
    )
    assert not (out / "checkpoints").exists() and sorted(p.name for p in out.iterdir()) == ["openrlhf"]
    assert sorted(p.name for p in (out / "openrlhf").iterdir()) == [SETTINGS_FILE, AGENT_FILE_NAME, "train.jsonl"]


def test_preset_dry_run_is_a_valid_eight_gpu_command(tmp_path, capsys):
    assert main(["--config", "openrlhf", "--dry-run", "--out", str(tmp_path / "preset")]) == 0
    args = openrlhf_parse(entry_args(shlex.split(capsys.readouterr().out.strip().splitlines()[-1])))
    assert (args.rollout.batch_size * args.rollout.n_samples_per_prompt, args.train.batch_size, args.eval.steps) == (
        256,
        128,
        10,
    )
    assert args.actor.num_nodes * args.actor.num_gpus_per_node == args.vllm.num_engines == 8


def test_cluster_guide_example_is_a_valid_sixteen_gpu_command(tmp_path):
    """docs/cluster.md's example config (its paths moved under tmp_path) builds a command OpenRLHF accepts."""
    guide = (Path(__file__).parents[2] / "docs" / "cluster.md").read_text()
    data = tomllib.loads(re.search(r"```toml\n(.*?)```", guide, re.S)[1])
    data["out_dir"], data["model"]["path"] = str(tmp_path / "run"), MODEL
    args = openrlhf_parse(
        entry_args(OpenRLHFLauncher(Config.from_dict(data).validate(check_model=False), dry_run=True).argv)
    )
    assert args.actor.num_nodes * args.actor.num_gpus_per_node == args.vllm.num_engines == 16
    assert Settings.read(Path(args.train.agent_func_path).with_name(SETTINGS_FILE)).max_turns == 6
    assert "max_turns" not in json.loads(lines(args.data.prompt_dataset)[0]["label"])["options"]


def test_bundled_model_is_named_not_converted_by_a_dry_run(tmp_path):
    config = Config.from_dict(
        {"backend": "openrlhf", "out_dir": str(tmp_path / "run"), "model": {"cache_dir": str(tmp_path / "models")}}
    )
    args = openrlhf_parse(entry_args(OpenRLHFLauncher(config, dry_run=True).argv))
    assert args.actor.model_name_or_path.startswith(f"{tmp_path}/models/SmolLM2-135M-Instruct.Q4_1-")
    assert not (tmp_path / "models").exists()


def test_wandb_key_is_used_but_not_printed(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="set WANDB_API_KEY"):
        launcher_for(tmp_path, ["log.wandb=true"])
    monkeypatch.setenv("WANDB_API_KEY", "0123abcd")
    launcher = launcher_for(tmp_path, ["log.wandb=true", 'log.wandb_project="agents"'])
    args = openrlhf_parse(entry_args(launcher.argv))
    assert (args.logger.wandb.key, args.logger.wandb.project) == ("0123abcd", "agents")
    assert "0123abcd" not in launcher.shell() and '--logger.wandb.key "$WANDB_API_KEY"' in launcher.shell()
    # The printed line gets the key back from the shell that runs it.
    echoed = subprocess.run(
        ["sh", "-c", f"printf '%s\\n' {launcher.shell()}"], capture_output=True, text=True, check=True
    ).stdout
    assert "0123abcd" in echoed.splitlines()


def test_settings_openrlhf_cannot_carry_are_noted(tmp_path):
    launcher = launcher_for(tmp_path, ['rollout.assistant_prefix="<answer>"', "rollout.max_turns=2"])
    assert any(
        "not carried" in note and "assistant_prefix" in note and "max_turns" not in note for note in launcher.notes
    )
    assert not any("not carried" in note for note in launcher_for(tmp_path).notes)


def test_a_turns_own_sampling_settings_travel_to_the_plugin(tmp_path):
    """OpenRLHF's loop gives a turn all of max_len; the plug-in reads the turn's budget, stop strings and top-k."""
    launcher = launcher_for(tmp_path, ['rollout.stop=["</answer>"]', "rollout.max_new_tokens=48", "rollout.top_k=20"])
    assert not any("not carried" in note for note in launcher.notes)
    settings = Settings.read(launcher.job_dir / SETTINGS_FILE)
    assert (settings.stop, settings.max_turn_tokens, settings.top_k) == (("</answer>",), 48, 20)


def test_the_plugins_settings_travel_in_its_file_and_no_variable(tmp_path):
    """Every plug-in setting comes from the config into the settings file; the run's environment gets only
    ``openrlhf.env_vars``, with no ``AGENTFLY_*`` variable."""
    launcher = launcher_for(
        tmp_path,
        [
            'openrlhf.env_pool="local"',
            "openrlhf.env_pool_size=3",
            "openrlhf.env_actor_options={num_cpus = 0.5, resources = {env_node = 1}}",
            "openrlhf.lease_timeout_s=30",
            "openrlhf.min_turn_tokens=8",
            'rollout.observation_role="user"',
            'openrlhf.env_vars={NCCL_DEBUG = "INFO"}',
        ],
    )
    assert launcher.env == {"NCCL_DEBUG": "INFO"} and launcher.runtime_env is None
    settings = Settings.read(launcher.job_dir / SETTINGS_FILE)
    assert settings == launcher.settings
    assert (settings.pool, settings.pool_size, settings.observation_role) == ("local", 3, "user")
    assert settings.actor_options == {"num_cpus": 0.5, "resources": {"env_node": 1}}
    assert (settings.lease_timeout_s, settings.min_turn_tokens, settings.tools) == (30.0, 8, ("calculator",))
    assert not any(word.startswith("AGENTFLY_") for word in shlex.split(launcher.shell()))


def test_the_tools_to_log_are_those_of_the_run_envs_manifests(tmp_path):
    mix = [{"id": "AgentFly/Math-v0", "options": {"dataset": "basic_arithmetic"}}, {"id": "AgentFly/Search-v0"}]
    launcher = launcher_for(tmp_path, env={"mix": mix})
    assert launcher.settings.tools == ("calculator", "retrieve")  # Mix-v0 itself has no manifest: none of its own


def test_the_turn_limit_travels_in_the_settings_not_the_labels(tmp_path):
    """OpenRLHF's loop has no turn limit, so the env enforces it: the plug-in gives the env ``rollout.max_turns``;
    the labels carry only the env's own options (test_openrlhf_agent.py plays both)."""
    launcher = launcher_for(tmp_path, ["rollout.max_turns=2"])
    labels = [
        json.loads(json.loads(line)["label"]) for line in (launcher.job_dir / "train.jsonl").read_text().splitlines()
    ]
    assert labels and not any("max_turns" in label["options"] for label in labels)
    assert Settings.read(launcher.job_dir / SETTINGS_FILE).max_turns == 2
    chosen = launcher_for(tmp_path, ["rollout.max_turns=2", "env.options.max_turns=5"])
    label = json.loads(json.loads((chosen.job_dir / "train.jsonl").read_text().splitlines()[0])["label"])
    assert label["options"]["max_turns"] == 5 and chosen.settings.max_turns == 2  # the label's own wins in the env


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["openrlhf.async_train=true"], "vLLM needs GPUs of its own"),
        (
            ["openrlhf.vllm_engines=4"],
            r"vllm_engines x vllm_tensor_parallel \(4\) must equal num_nodes x gpus_per_node \(8\)",
        ),
        (["rollout.samples_per_prompt=1"], "samples_per_prompt must be at least 2"),
        (['openrlhf.colocate="critic-reward"'], "places a critic, but grpo has none"),
        (['openrlhf.colocate="everything"'], "openrlhf.colocate must be one of"),
        (["openrlhf.ref_gpus_per_node=4"], "reference model needs the actor's layout"),
        (['algo="ppo"', "openrlhf.critic_num_nodes=2"], "the critic shares the actor's GPUs"),
        (["openrlhf.eval_every=-1"], "openrlhf.eval_every must be 0 or more"),
        (["train.micro_batch_size=8"], "every actor GPU needs a micro-batch"),
        (["train.micro_batch_size=3"], "must be a multiple of 24"),
        (['out_dir="runs/a,b"'], "must not contain ',' or '@'"),
        (["openrlhf.zero_stage=4"], "zero_stage must be 0, 1, 2 or 3"),
        (["openrlhf.vllm_gpu_memory_utilization=1.5"], r"must be in \(0, 1\]"),
        (['openrlhf.env_pool="remote"'], "openrlhf.env_pool must be one of"),
        (
            ["openrlhf.env_vars={AGENTFLY_ENV_ACTOR_OPTIONS = '{\"num_cpus\": 1}'}"],
            "openrlhf.env_vars sets AGENTFLY_ENV_ACTOR_OPTIONS, which the plug-in does not read.*set openrlhf.env_actor_options",
        ),
        (
            ["openrlhf.runtime_env={env_vars = {AGENTFLY_STOP = '[]'}}"],
            "openrlhf.runtime_env sets AGENTFLY_STOP.*set rollout.stop",
        ),
    ],
)
def test_bad_openrlhf_configs_are_clear(overrides, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides(Config.from_dict({"backend": "openrlhf", "model": {"path": MODEL}}), overrides).validate(
            check_model=False
        )


def test_running_here_without_the_gpu_stack_fails_before_exporting(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # a machine without vLLM, even where it is installed
    config = Config.from_dict({"backend": "openrlhf", "out_dir": str(tmp_path / "run"), "model": {"path": MODEL}})
    with pytest.raises(ConfigError, match=r"vllm.* not installed.*--dry-run prints the command"):
        OpenRLHFLauncher(config)
    assert not (tmp_path / "run").exists()
    assert backend_class(config) is OpenRLHFLauncher


CLI = """
import sys
sys.modules["vllm"] = None  # a machine without vLLM, even where it is installed: nothing may start
from agentfly_train.cli import main
for argv in {cases!r}:
    try:
        print("exit", main(argv))
    except SystemExit as exit:
        print("exit", exit.code)
print("heavy", sorted(m for m in ("torch", "transformers", "vllm", "ray") if sys.modules.get(m) is not None))
"""


def test_cli_exit_codes_and_no_heavy_imports(tmp_path):
    out = str(tmp_path / "cli run")
    cases = [
        ["--backend", "openrlhf", "--dry-run", "--out", out],
        ["--backend", "openrlhf", "--out", out],
        ["--backend", "openrlhf", "--dry-run", "--out", out, "--set", "openrlhf.async_train=true"],
        ["--dry-run", "--out", out],
    ]
    run = subprocess.run(
        [sys.executable, "-c", CLI.format(cases=cases)], capture_output=True, text=True, timeout=120, check=False
    )
    assert [line for line in run.stdout.splitlines() if line.startswith("exit")] == [
        "exit 0",
        "exit 2",
        "exit 2",
        "exit 2",
    ], run.stderr
    assert "heavy []" in run.stdout  # a dry run loads no model, no Ray, no vLLM
    for expected in [
        "not installed; running OpenRLHF here needs a GPU machine",
        "vLLM needs GPUs of its own",
        "--dry-run prints the command a backend would run: use it with --backend openrlhf",
    ]:
        assert expected in run.stderr


def test_the_train_rollout_correction_reaches_openrlhf_as_its_own_flags(tmp_path):
    plain = openrlhf_parse(entry_args(launcher_for(tmp_path).argv))
    assert plain.algo.advantage.is_correction_level == "off"
    launcher = launcher_for(
        tmp_path,
        [
            "algorithm.is_correction_level=token",
            "algorithm.is_correction_mode=clip",
            "algorithm.is_correction_threshold=[0.5, 3.0]",
        ],
    )
    args = openrlhf_parse(entry_args(launcher.argv))
    advantage = args.algo.advantage
    assert (advantage.is_correction_level, advantage.is_correction_mode, advantage.is_correction_gating) == (
        "token",
        "clip",
        "ratio",
    )
    assert advantage.is_correction_threshold == [0.5, 3.0]
