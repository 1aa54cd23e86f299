"""``agentfly-train --backend openrlhf``: OpenRLHF's PPO trainer, launched from an agentfly-train config.

The :class:`~agentfly_train.config.Config` the local backend reads becomes one
``python -m openrlhf.cli.train_ppo_ray`` command (OpenRLHF 0.11.2's dotted flags):

* the algorithm: ppo -> ``gae`` (with a critic, which OpenRLHF makes from the policy), grpo ->
  ``group_norm``, rloo -> ``rloo``, reinforce++ -> ``reinforce``, reinforce++-baseline ->
  ``reinforce_baseline``; the KL (coefficient, estimator, as a loss or in the reward), the clip range,
  gamma and lambda, the reward clip and the advantage normalisation;
* the rollout: prompts per step (``--rollout.batch_size``), samples per prompt, temperature, top-p, the
  episode's token budget (``--data.max_len``) and a turn's (``--rollout.max_new_tokens``);
* training: learning rates on the local backend's schedule (linear warm-up, then constant), epochs,
  batch sizes, gradient clipping and checkpointing, the seed;
* the run dir: checkpoints in ``checkpoints/``, the final model in ``final/``, TensorBoard in
  ``tensorboard/``, and W&B when asked (OpenRLHF's switch is the key: ``$WANDB_API_KEY``);
* the tasks: ``train.steps x rollout.prompts_per_step`` tasks of the env, exported with
  :func:`~agentfly_train.dataset.export_tasks` to ``<out_dir>/openrlhf/train.jsonl`` (one pass over
  them is the run), and ``eval.episodes`` eval-split tasks to ``eval.jsonl`` when
  ``openrlhf.eval_every`` is set; OpenRLHF renders their messages with the model's chat template;
* the plug-in: its settings go into ``<out_dir>/openrlhf/agentfly-settings.json`` (a
  :class:`~agentfly_train.backends.openrlhf.settings.Settings` record: the env pool, the observation role, a
  turn's sampling settings, the turn limit, the tools to log, and with an agent program, ``--agent PATH.py:FUNC``
  or ``--agent-command CMD``, the ``[agent]`` section with a program's file as an absolute path), and
  ``--train.agent_func_path`` names ``agentfly_agent.py`` beside it, an agent file that binds the env loop's
  executor (or the program executor) to that file (:func:`~agentfly_train.backends.openrlhf.settings.write_plugin`);
* the cluster: the ``[openrlhf]`` section (:class:`~agentfly_train.backends.openrlhf.config.OpenRLHFConfig`).

Three ways to launch:

* ``--dry-run`` exports the prompt files, writes the plug-in's settings and agent files, and prints the command
  as one copy-pasteable shell line (after ``#`` notes that show the settings); it
  needs neither vLLM nor a GPU, and converts no model (a GGUF model shows the folder it converts to).
* By default the command runs here, in a subprocess that streams its output (a GPU machine with the
  ``openrlhf`` extra), the agent file named by its absolute path; ``openrlhf.env_vars`` go in its environment,
  which the workers of the Ray instance OpenRLHF starts inherit (an existing cluster is reached with
  ``openrlhf.ray_address``).
* With ``openrlhf.ray_address`` set it is sent to that cluster with ``ray job submit``. The job's working
  dir is ``<out_dir>/openrlhf``: the prompt files, the settings and agent files (named by their bare file
  names) plus links to the four import packages (Ray uploads what they point at, and puts the folder on
  every worker's path), so the job runs this very code; ``openrlhf.env_vars`` go in the runtime env's
  ``env_vars``, agentfly-gym's requirements in its ``pip`` list.

OpenRLHF's agent loop has no per-turn budget, top-k, stop strings, assistant prefix or turn limit: an
episode ends when its env ends it or its token budget runs out. The plug-in applies a turn's budget
(``rollout.max_new_tokens``), top-k and stop strings to each of its ``generate`` calls (the settings'
``max_turn_tokens``, ``top_k``, ``stop``). The turn limit is carried too: the plug-in gives each episode's env
``rollout.max_turns`` as its ``max_turns`` option (which every AgentFly env takes) unless the label's options
(``env.options``) set it; the exported labels do not carry it. The launcher notes an assistant prefix, which is not
carried.

Example:
    >>> config = Config.from_dict({"backend": "openrlhf", "algo": "rloo"})
    >>> args = openrlhf_args(config, model="Qwen/Qwen2.5-0.5B-Instruct", train_data="train.jsonl",
    ...                      agent_file="agent.py", out_dir="/runs/x")
    >>> args[args.index("--algo.advantage.estimator") + 1], args[args.index("--rollout.n_samples_per_prompt") + 1]
    ('rloo', '4')
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from agentfly_env.core.manifest import manifest_of
from agentfly_train.backends.openrlhf.settings import SETTINGS_FILE, Settings, write_plugin
from agentfly_train.config import AgentConfig, Config, ConfigError, RolloutConfig
from agentfly_train.dataset import export_tasks
from agentfly_train.models import (
    bundled_gguf,
    converted_dir,
    is_bundled,
    resolve_model_path,
)

ENTRY_MODULE = "openrlhf.cli.train_ppo_ray"
#: What a submitted job carries in its working dir: the import packages (by import name).
PACKAGES = ("agentfly_env", "agentfly_envs", "agentfly_train", "agentfly_bench")
#: The folder under ``out_dir`` that holds the prompt files, the settings and the agent file (and, submitting, is the
#: job's working dir).
JOB_DIR = "openrlhf"
#: Rollout fields OpenRLHF's agent loop has no counterpart for.
NOT_CARRIED = ("assistant_prefix",)
#: Rollout fields an agent program's calls do not take (the program sends its own stop strings).
NOT_CARRIED_BY_PROGRAMS = ("stop",)


def openrlhf_args(
    config: Config,
    *,
    model: str,
    train_data: str,
    agent_file: str,
    out_dir: str,
    eval_data: str | None = None,
    wandb_key: str | None = None,
) -> list[str]:
    """The ``train_ppo_ray`` arguments for ``config``; paths are given as the command will see them.

    Args:
        config: A validated config with ``backend = "openrlhf"``.
        model: ``--actor.model_name_or_path``: a hub id or a transformers folder.
        train_data: The train prompt file.
        agent_file: The plug-in file.
        out_dir: Where checkpoints, the final model and TensorBoard go.
        eval_data: The eval prompt file (with ``openrlhf.eval_every``).
        wandb_key: Turns W&B on (OpenRLHF logs in with it when no key is configured).
    """
    cluster, rollout, algorithm, train = config.openrlhf, config.rollout, config.algorithm, config.train
    colocated = cluster.colocated
    batch = train.mini_batch_size or config.episodes_per_step
    optimizer_steps = train.steps * (config.episodes_per_step // batch) * train.epochs
    # OpenRLHF takes the warm-up as a ratio and rounds steps x ratio up: half a step low survives float error.
    warmup_ratio = max(train.warmup_steps - 0.5, 0) / optimizer_steps
    checkpoints = train.resume if train.resume not in ("", "auto") else f"{out_dir}/checkpoints"

    def optimizer(role: str, lr: float) -> list[Any]:
        return [
            f"--{role}.adam.lr",
            lr,
            f"--{role}.adam.weight_decay",
            train.weight_decay,
            f"--{role}.max_norm",
            train.max_grad_norm,
            f"--{role}.lr_scheduler",
            "constant_with_warmup",
            f"--{role}.lr_warmup_ratio",
            warmup_ratio,
        ]

    args: list[Any] = [
        "--actor.num_nodes",
        cluster.num_nodes,
        "--actor.num_gpus_per_node",
        cluster.gpus_per_node,
        "--ref.num_nodes",
        cluster.ref_layout[0],
        "--ref.num_gpus_per_node",
        cluster.ref_layout[1],
        "--vllm.num_engines",
        cluster.vllm_engines,
        "--vllm.tensor_parallel_size",
        cluster.vllm_tensor_parallel,
        "--vllm.gpu_memory_utilization",
        cluster.vllm_gpu_memory_utilization,
        "--ds.zero_stage",
        cluster.zero_stage,
        "--ds.param_dtype",
        cluster.param_dtype,
        "--actor.model_name_or_path",
        model,
        "--train.agent_func_path",
        agent_file,
        "--data.prompt_dataset",
        train_data,
        "--data.input_key",
        "prompt",
        "--data.label_key",
        "label",
        "--data.apply_chat_template",
        "--data.max_len",
        rollout.max_episode_tokens,
        "--rollout.max_new_tokens",
        rollout.max_new_tokens,
        "--rollout.batch_size",
        rollout.prompts_per_step,
        "--rollout.n_samples_per_prompt",
        rollout.samples_per_prompt,
        "--rollout.micro_batch_size",
        cluster.rollout_micro_batch_size or train.micro_batch_size,
        "--rollout.temperature",
        rollout.temperature,
        "--rollout.top_p",
        rollout.top_p,
        "--algo.advantage.estimator",
        config.estimator,
        "--algo.advantage.gamma",
        algorithm.gamma,
        "--algo.advantage.lambd",
        algorithm.lambd,
        "--algo.kl.init_coef",
        algorithm.kl_coef,
        "--algo.kl.estimator",
        config.kl_estimator,
        "--actor.eps_clip_low_high",
        algorithm.clip_eps_low,
        algorithm.clip_eps_high,
        "--actor.loss_agg_mode",
        algorithm.loss_agg,
        "--reward.clip_range",
        -algorithm.reward_clip,
        algorithm.reward_clip,
        "--train.num_episodes",
        1,
        "--train.max_epochs",
        train.epochs,
        "--train.seed",
        config.seed,
        "--train.batch_size",
        batch,
        "--train.micro_batch_size",
        train.micro_batch_size,
        *optimizer("actor", train.lr),
        "--ckpt.output_dir",
        f"{out_dir}/final",
        "--ckpt.path",
        checkpoints,
        "--ckpt.save_steps",
        train.save_every or -1,
        "--ckpt.max_num",
        train.keep_checkpoints,
    ]
    if (
        config.algo_spec.critic
    ):  # ppo's critic; no value clip (0) is an unbounded one, as OpenRLHF's flag cannot be unset
        args += [
            "--critic.num_nodes",
            cluster.critic_layout[0],
            "--critic.num_gpus_per_node",
            cluster.critic_layout[1],
            *optimizer("critic", train.critic_lr),
            "--critic.value_clip",
            algorithm.value_clip or float("inf"),
        ]
    if "critic-reward" in colocated:
        # OpenRLHF checks the (unused: the plug-in rewards) reward model's layout against the critic's.
        args += [
            "--train.colocate_critic_reward",
            "--reward.num_nodes",
            cluster.critic_layout[0],
            "--reward.num_gpus_per_node",
            cluster.critic_layout[1],
        ]
    args += _switches(
        {
            "--train.colocate_all": "all" in colocated,
            "--train.colocate_actor_ref": "actor-ref" in colocated,
            "--vllm.enable_sleep": "all" in colocated and cluster.enable_sleep,
            "--ds.enable_sleep": "all" in colocated and cluster.enable_sleep,
            "--vllm.enable_prefix_caching": cluster.vllm_prefix_caching,
            "--vllm.enforce_eager": cluster.vllm_enforce_eager,
            "--ds.packing_samples": cluster.packing,
            "--actor.gradient_checkpointing_enable": train.gradient_checkpointing,
            "--algo.kl.use_loss": config.kl_mode == "loss",
            "--algo.advantage.no_std_norm": not algorithm.advantage_std_norm,
            "--ckpt.load_enable": bool(train.resume),
        }
    )
    if algorithm.dual_clip:
        args += ["--actor.dual_clip", algorithm.dual_clip]
    if algorithm.is_correction_level != "off":  # OpenRLHF then asks vLLM for the sampled tokens' log-probs
        args += [
            "--algo.advantage.is_correction_level",
            algorithm.is_correction_level,
            "--algo.advantage.is_correction_mode",
            algorithm.is_correction_mode,
            "--algo.advantage.is_correction_gating",
            algorithm.is_correction_gating,
            "--algo.advantage.is_correction_threshold",
            *algorithm.is_correction_threshold,
        ]
    if cluster.async_train:
        args += ["--train.async_enable", "--train.async_queue_size", cluster.async_queue_size]
    if eval_data:
        args += [
            "--eval.dataset",
            eval_data,
            "--eval.steps",
            cluster.eval_every,
            "--eval.temperature",
            config.eval.temperature,
            "--eval.n_samples_per_prompt",
            cluster.eval_samples_per_prompt,
        ]
    if config.log.tensorboard:
        args += ["--logger.tensorboard_dir", f"{out_dir}/tensorboard"]
    if wandb_key:
        args += ["--logger.wandb.key", wandb_key, "--logger.wandb.project", config.log.wandb_project]
    return [str(arg) for arg in args] + list(cluster.extra_args)


class OpenRLHFLauncher:
    """The ``openrlhf`` backend (a :class:`~agentfly_train.backends.TrainingBackend`): built from a config,
    then :meth:`fit` (or :meth:`run`) runs OpenRLHF's command.

    Building checks what the chosen mode needs, exports the prompt files and builds the command;
    nothing starts until :meth:`fit`.

    Attributes:
        argv: The whole command (``ray job submit ... -- python3 -m ...`` when submitting).
        env: The environment variables the run gets (``openrlhf.env_vars``).
        settings: The plug-in's settings, written to ``job_dir / "agentfly-settings.json"``.
        agent_file: The agent file OpenRLHF loads (``job_dir / "agentfly_agent.py"``), bound to the settings file.
        runtime_env: The Ray runtime env of a submitted job; None for a run here.
        job_dir: Where the prompt files, the settings and the agent file are (the job's working dir when
            submitting).
        notes: What was written where, and what the command does not carry.
        dry_run: Prepare and describe only: :meth:`fit` runs nothing.

    Example:
        >>> launcher = OpenRLHFLauncher(Config.from_dict({"backend": "openrlhf"}), dry_run=True)  # doctest: +SKIP
        >>> print(launcher.shell())  # doctest: +SKIP
        /venv/bin/python -m openrlhf.cli.train_ppo_ray --actor.num_nodes 1 ... --train.agent_func_path
        /abs/runs/x/openrlhf/agentfly_agent.py ...
    """

    def __init__(self, config: Config, *, dry_run: bool = False) -> None:
        config.validate(check_model=False)
        self.dry_run = dry_run
        cluster = config.openrlhf
        submit = bool(cluster.ray_address)
        if not dry_run:
            _check_installed(submit=submit, wandb=config.log.wandb)
        self._secrets: dict[str, str] = {}
        if config.log.wandb:
            if not os.environ.get("WANDB_API_KEY"):
                raise ConfigError("log.wandb: OpenRLHF turns W&B on with its key; set WANDB_API_KEY in the environment")
            self._secrets["WANDB_API_KEY"] = os.environ["WANDB_API_KEY"]
        out_dir = Path(config.out_dir).expanduser().resolve()
        self.job_dir = out_dir / JOB_DIR
        self.env = {name: str(value) for name, value in cluster.env_vars.items()}
        self.settings = plugin_settings(config)
        model = _model_argument(config, convert=not dry_run)
        train_file, eval_file = self.job_dir / "train.jsonl", self.job_dir / "eval.jsonl"
        prompts = config.train.steps * config.rollout.prompts_per_step
        export_tasks(config, train_file, count=prompts)
        if cluster.eval_every:
            export_tasks(config, eval_file, count=config.eval.episodes, split="eval")
        self.agent_file = write_plugin(self.job_dir, self.settings)
        executor = "the program executor" if config.agent.plays else "the env loop's executor"
        self.notes = [
            f"{config.algo} ({config.estimator}) on {config.env.id}: {config.train.steps} steps x {config.rollout.prompts_per_step} "
            f"prompts x {config.rollout.samples_per_prompt} samples; {prompts} train prompts in {train_file}"
            + (f", {config.eval.episodes} eval prompts in {eval_file}" if cluster.eval_every else ""),
            f"plug-in: {self.agent_file} ({executor}) with its settings in {self.job_dir / SETTINGS_FILE}: "
            + msgspec.json.encode(self.settings).decode(),
        ]
        if self.env:
            self.notes.append("env: " + " ".join(f"{name}={shlex.quote(value)}" for name, value in self.env.items()))
        defaults = RolloutConfig()
        not_carried = NOT_CARRIED + (NOT_CARRIED_BY_PROGRAMS if config.agent.plays else ())
        ignored = [
            f"rollout.{name}" for name in not_carried if getattr(config.rollout, name) != getattr(defaults, name)
        ]
        if ignored:
            self.notes.append(f"not carried (OpenRLHF's agent loop has no such setting): {', '.join(ignored)}")
        if config.agent.plays:
            self.notes.append(
                f"agent: {config.agent.command or config.agent.program} plays every episode, in each vLLM engine's "
                "process (its calls go to that engine through the gateway): its paths are read on the engine's node"
            )
        common = {"model": model, "wandb_key": self._secrets.get("WANDB_API_KEY")}
        if not submit:
            self.runtime_env: dict[str, Any] | None = None
            self.argv = [
                sys.executable,
                "-m",
                ENTRY_MODULE,
                *openrlhf_args(
                    config,
                    **common,
                    train_data=str(train_file),
                    agent_file=str(self.agent_file),
                    out_dir=str(out_dir),
                    eval_data=str(eval_file) if cluster.eval_every else None,
                ),
            ]
            return
        # Submitting: paths relative to the job's working dir, which is every Ray worker's cwd on the cluster.
        self._link_packages()
        if Path(model).is_absolute():
            self.notes.append(f"model {model} is a folder on this machine: the cluster must see it at that path")
        entry = [
            "python3",
            "-m",
            ENTRY_MODULE,
            *openrlhf_args(
                config,
                **common,
                train_data=train_file.name,
                agent_file=self.agent_file.name,
                out_dir=cluster.cluster_out_dir or str(out_dir),
                eval_data=eval_file.name if cluster.eval_every else None,
            ),
        ]
        for word in entry:
            # `ray job submit` joins the entrypoint with list2cmdline (Windows quoting) and runs it with /bin/sh.
            if shlex.quote(word) != word:
                raise ConfigError(
                    f"{word!r} cannot pass through `ray job submit` (it joins the entrypoint for a shell): use paths and values "
                    "without spaces or quotes (openrlhf.cluster_out_dir sets where the job writes)"
                )
        self.runtime_env = self._runtime_env(config)
        ray = Path(sys.executable).with_name("ray")
        self.argv = [
            str(ray) if ray.exists() else "ray",
            "job",
            "submit",
            "--address",
            cluster.ray_address,
            "--runtime-env-json",
            json.dumps(self.runtime_env),
            *cluster.submit_args,
            "--",
            *entry,
        ]

    def describe(self) -> str:
        """What was prepared (``# ...`` lines), then the command as one shell line."""
        return "\n".join([*(f"# {note}" for note in self.notes), self.shell()])

    def fit(self, *, on_step: Callable[[int, dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Run the command, whose output streams through (OpenRLHF reports its own steps: ``on_step`` is not
        called), or nothing in a dry run. The summary is the command's ``exit_code``."""
        return {"exit_code": 0 if self.dry_run else self.run()}

    def shell(self) -> str:
        """The command as one shell line; a run here carries its variables in front, secrets show as ``"$NAME"``."""
        hidden = {value: name for name, value in self._secrets.items()}
        words = [f'"${hidden[word]}"' if word in hidden else shlex.quote(word) for word in self.argv]
        prefix = (
            [] if self.runtime_env is not None else [f"{name}={shlex.quote(value)}" for name, value in self.env.items()]
        )
        return " ".join(prefix + words)

    def run(self) -> int:
        """Run the command (its output streams through); return its exit code."""
        env = os.environ if self.runtime_env is not None else {**os.environ, **self.env}
        return subprocess.run(self.argv, env=env, check=False).returncode

    def _link_packages(self) -> None:
        """Links to the import packages in the job dir: Ray's upload follows them."""
        for name in PACKAGES:
            link = self.job_dir / name
            if link.is_symlink():
                link.unlink()
            elif link.exists():
                raise ConfigError(f"{link} is in the way of the job's link to the {name} package; remove it")
            link.symlink_to(_package_dir(name), target_is_directory=True)

    def _runtime_env(self, config: Config) -> dict[str, Any]:
        runtime_env: dict[str, Any] = {
            "working_dir": str(self.job_dir),
            "excludes": ["__pycache__/", "*.pyc"],
            "env_vars": self.env,
        }
        if config.openrlhf.requirements:
            runtime_env["pip"] = core_requirements()
        extra = dict(config.openrlhf.runtime_env)
        runtime_env["env_vars"] = {
            **self.env,
            **{name: str(value) for name, value in extra.pop("env_vars", {}).items()},
        }
        return {**runtime_env, **extra}


def plugin_settings(config: Config) -> Settings:
    """The plug-in's settings for a run of ``config``: ``[openrlhf]``'s env pool, the rollout's observation role,
    a turn's sampling settings and turn limit, the tools of the run's envs (:func:`run_tools`) and the ``[agent]``
    section (:func:`agent_settings`) when an agent plays.

    Example:
        >>> settings = plugin_settings(Config.from_dict({"backend": "openrlhf", "rollout": {"max_turns": 3}}))
        >>> settings.pool, settings.max_turns, settings.max_turn_tokens, settings.tools, settings.agent.plays
        ('ray', 3, 256, ('calculator',), False)
    """
    cluster, rollout = config.openrlhf, config.rollout
    return Settings(
        pool=cluster.env_pool,
        pool_size=cluster.env_pool_size,
        actor_options=dict(cluster.env_actor_options),
        observation_role=rollout.observation_role,
        lease_timeout_s=cluster.lease_timeout_s,
        min_turn_tokens=cluster.min_turn_tokens,
        # OpenRLHF gives a turn all that is left of max_len: the plug-in applies the turn's own settings.
        max_turn_tokens=rollout.max_new_tokens,
        stop=tuple(rollout.stop),
        top_k=rollout.top_k,
        # OpenRLHF's loop has no turn limit: the plug-in gives it to each episode's env.
        max_turns=rollout.max_turns,
        tools=run_tools(config),
        agent=agent_settings(config.agent) if config.agent.plays else AgentConfig(),
    )


def run_tools(config: Config) -> tuple[str, ...]:
    """The tool names of the run's envs, sorted: those of ``env.id``'s manifest and of each ``[[env.mix]]``
    component's (:func:`agentfly_env.core.manifest.manifest_of`). An id registered without a manifest contributes
    none, so its tools' calls are not logged per tool; a manifest lists the tools of the env as registered
    (its default options).

    Example:
        >>> run_tools(Config.from_dict({"env": {"mix": [{"id": "AgentFly/Math-v0"}, {"id": "AgentFly/Code-v0"}]}}))
        ('calculator', 'code_interpreter')
    """
    names: set[str] = set()
    for env_id in [config.env.id, *(component.id for component in config.env.mix)]:
        manifest = manifest_of(env_id)
        if manifest is not None:
            names.update(manifest.tool_names)
    return tuple(sorted(names))


def agent_settings(agent: AgentConfig) -> AgentConfig:
    """The ``[agent]`` section as the program executor reads it from the settings file: a program's file made
    absolute (the rollout actors do not run in this directory); the warm start's expert stays here.

    Example:
        >>> settings = agent_settings(AgentConfig(program="my_agent/agent.py:solve", timeout_s=60, expert="e.py:f"))
        >>> settings.program == f"{Path.cwd()}/my_agent/agent.py:solve", settings.timeout_s, settings.expert
        (True, 60, '')
    """
    where, _, function = agent.program.rpartition(":")
    program = f"{Path(where).expanduser().resolve()}:{function}" if where.endswith(".py") else agent.program
    return msgspec.structs.replace(agent, program=program, expert="")


def core_requirements() -> list[str]:
    """agentfly-gym's requirements without extras: what its envs need on every node.

    Raises:
        ConfigError: when agentfly-gym is not installed (so its requirements are unknown).
    """
    try:
        requires = importlib.metadata.requires("agentfly-gym") or []
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(
            "agentfly-gym is not installed, so its requirements are unknown: pip install -e . "
            "(or set openrlhf.requirements = false)"
        ) from None
    return [requirement for requirement in requires if "extra ==" not in requirement]


def _check_installed(*, submit: bool, wandb: bool) -> None:
    needed = ["ray"] if submit else ["openrlhf", "vllm", "deepspeed", "ray"] + (["wandb"] if wandb else [])
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        where = (
            "submitting needs the ray extra: pip install '.[ray]'"
            if submit
            else ("running OpenRLHF here needs a GPU machine with the extra: pip install '.[openrlhf]'")
        )
        raise ConfigError(
            f"{', '.join(missing)} not installed; {where}. --dry-run prints the command without it, and "
            "openrlhf.ray_address (--ray-address) submits it to a Ray cluster"
        )


def _model_argument(config: Config, *, convert: bool) -> str:
    """``model.path`` as OpenRLHF loads it: a hub id or an absolute folder (a GGUF model as the folder it is
    converted to: converted now when ``convert``, else only named)."""
    path, cache = config.model.path, config.model.cache_dir or None
    try:
        gguf = bundled_gguf() if is_bundled(path) else Path(path).expanduser() if path.endswith(".gguf") else None
    except FileNotFoundError as error:
        raise ConfigError(str(error)) from None
    if gguf is not None and not convert:
        if not gguf.is_file():
            raise ConfigError(f"model path {path!r} does not exist")
        return str(converted_dir(gguf, cache))
    resolved = resolve_model_path(path, cache)
    return str(Path(resolved).resolve()) if Path(resolved).exists() else resolved


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations, f"{name} is part of this project"
    return Path(next(iter(spec.submodule_search_locations)))


def _switches(flags: dict[str, bool]) -> list[str]:
    return [flag for flag, on in flags.items() if on]
