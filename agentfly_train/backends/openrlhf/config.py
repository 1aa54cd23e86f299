"""The ``[openrlhf]`` section of a run's config: cluster settings of the ``openrlhf`` backend, beside its
launcher (:mod:`~agentfly_train.backends.openrlhf.launcher` maps every field to its flag), registered
as the backend's section in :data:`agentfly_train.backends.BACKENDS`.

Fields are typed, so a wrong type, an unknown choice or a number out of range fails when the config is
read (:mod:`agentfly_train.config` decodes every section with msgspec); :meth:`OpenRLHFConfig.problem`
checks the combinations OpenRLHF would reject only once the cluster has started.

Example:
    >>> OpenRLHFConfig().actor_gpus, sorted(OpenRLHFConfig(colocate="actor-ref+critic-reward").colocated)
    (8, ['actor-ref', 'critic-reward'])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

import msgspec

from agentfly_train.algorithm_registry import ALGORITHMS
from agentfly_train.config import AtLeastOne, BackendSection, Positive, ZeroOrMore

if TYPE_CHECKING:
    from agentfly_train.config import Config

#: Which roles share GPUs (OpenRLHF's ``--train.colocate_*`` flags).
Colocate = Literal["all", "actor-ref", "critic-reward", "actor-ref+critic-reward", "none"]
#: Where the plug-in keeps its envs (``openrlhf.env_pool``, the settings file's ``pool``).
EnvPool = Literal["ray", "local", "auto"]
ENV_POOLS: tuple[str, ...] = get_args(EnvPool)
#: Environment variables the plug-in does not read, each with the config field that sets what it names: the plug-in's
#: settings travel in the settings file the launcher writes, so ``env_vars`` refuses them.
PLUGIN_VARIABLES = {
    "AGENTFLY_ENV_POOL": "openrlhf.env_pool",
    "AGENTFLY_ENV_POOL_SIZE": "openrlhf.env_pool_size",
    "AGENTFLY_ENV_ACTOR_OPTIONS": "openrlhf.env_actor_options",
    "AGENTFLY_LEASE_TIMEOUT_S": "openrlhf.lease_timeout_s",
    "AGENTFLY_MIN_TURN_TOKENS": "openrlhf.min_turn_tokens",
    "AGENTFLY_OBSERVATION_ROLE": "rollout.observation_role",
    "AGENTFLY_MAX_TURN_TOKENS": "rollout.max_new_tokens",
    "AGENTFLY_STOP": "rollout.stop",
    "AGENTFLY_TOP_K": "rollout.top_k",
    "AGENTFLY_AGENT": "the [agent] section",
}


class OpenRLHFConfig(BackendSection):
    """Cluster settings of the ``openrlhf`` backend (OpenRLHF 0.11.2 on vLLM, DeepSpeed and Ray).

    The defaults fit one node with 8 GPUs in OpenRLHF's "hybrid engine" layout: 8 vLLM engines, the
    DeepSpeed policy, its reference model (and the PPO critic) all share the 8 GPUs, vLLM sleeping while
    DeepSpeed trains. The rest of the run (model, algorithm, batch sizes, lengths) comes from the other
    sections; ``agentfly_train/backends/openrlhf/launcher.py`` maps every field to its flag.
    """

    vllm_engines: AtLeastOne = 8
    """vLLM engines that generate rollouts (``--vllm.num_engines``)."""
    vllm_tensor_parallel: AtLeastOne = 1
    """GPUs per vLLM engine (``--vllm.tensor_parallel_size``). Colocated (``all``, sync), ``vllm_engines x
    vllm_tensor_parallel`` must equal the actor's GPUs."""
    vllm_gpu_memory_utilization: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.6
    """Share of a GPU's memory vLLM takes for weights and KV cache; 0.6 leaves DeepSpeed room on a shared GPU (raise it
    when vLLM has GPUs of its own)."""
    vllm_prefix_caching: bool = True
    """Reuse the KV cache of shared prefixes: every turn re-sends the episode so far, so multi-turn rollouts gain
    most."""
    vllm_enforce_eager: bool = False
    """No CUDA graphs in vLLM (less memory, slower generation)."""
    enable_sleep: bool = True
    """Put vLLM and DeepSpeed to sleep in turn (``--vllm.enable_sleep``, ``--ds.enable_sleep``); only with ``colocate =
    "all"``, where it frees the shared GPUs."""
    num_nodes: AtLeastOne = 1
    """Nodes of the policy (actor) group."""
    gpus_per_node: AtLeastOne = 8
    """GPUs per node of the policy group."""
    ref_num_nodes: ZeroOrMore = 0
    """Nodes of the reference model (KL); 0 = as the actor (needed when colocated)."""
    ref_gpus_per_node: ZeroOrMore = 0
    """GPUs per node of the reference model; 0 = as the actor."""
    critic_num_nodes: ZeroOrMore = 0
    """Nodes of the PPO critic; 0 = as the actor."""
    critic_gpus_per_node: ZeroOrMore = 0
    """GPUs per node of the PPO critic; 0 = as the actor."""
    colocate: Colocate = "all"
    """Which roles share GPUs: ``all`` (every model and the vLLM engines), ``actor-ref``, ``critic-reward`` (PPO),
    ``actor-ref+critic-reward``, or ``none`` (each role its own GPUs)."""
    async_train: bool = False
    """Generate the next rollout batch while training on the last one (``--train.async_enable``; one step off-policy).
    vLLM then needs GPUs of its own: not with ``colocate = "all"``."""
    async_queue_size: AtLeastOne = 1
    """Rollout batches the async generator may run ahead."""
    zero_stage: Literal[0, 1, 2, 3] = 3
    """DeepSpeed ZeRO stage (3 shards parameters too, as OpenRLHF's hybrid-engine recipes do)."""
    param_dtype: Literal["bf16", "fp16"] = "bf16"
    """``bf16`` or ``fp16`` training weights (``model.dtype`` is the local backend's)."""
    packing: bool = True
    """Pack samples into one row per micro-batch (``--ds.packing_samples``; needs flash-attention)."""
    rollout_micro_batch_size: ZeroOrMore = 0
    """Episodes per GPU per forward pass when scoring rollouts (log-probs, values); 0 = ``train.micro_batch_size``."""
    eval_every: ZeroOrMore = 0
    """Evaluate on ``eval.episodes`` tasks of the eval split every N steps (greedy at ``eval.temperature``); 0 = no
    evaluation."""
    eval_samples_per_prompt: AtLeastOne = 1
    """Samples per eval task."""
    env_pool: EnvPool = "ray"
    """Where the plug-in keeps the envs: ``ray`` (actors across the cluster: env code never blocks vLLM), ``local`` (in
    the vLLM engine's process) or ``auto`` (Ray when it runs)."""
    env_pool_size: AtLeastOne = 16
    """Env instances per env (and options) in each vLLM engine process."""
    env_actor_options: dict[str, Any] = msgspec.field(default_factory=dict)
    """Ray options of the env actors (fields of ``agentfly_env.resources.distributed.RayEnvOptions``), e.g. ``{resources
    = {env_node = 1}}`` to place them on CPU nodes that have that resource."""
    lease_timeout_s: Positive = 600.0
    """How long an episode waits for a free env of its pool."""
    min_turn_tokens: ZeroOrMore = 16
    """Room a model turn needs to be worth generating: an episode whose next observation leaves less of the token
    budget ends truncated (``truncation_context``)."""
    env_vars: dict[str, Any] = msgspec.field(default_factory=dict)
    """More environment variables for the run (e.g. ``{NCCL_DEBUG = "INFO"}``); the plug-in's own settings are in the
    settings file the launcher writes, from this section and ``[rollout]``."""
    ray_address: str = ""
    """Empty: run the command here (a GPU machine with the ``openrlhf`` extra). Set (``http://head:8265``): submit it to
    that cluster with ``ray job submit``."""
    cluster_out_dir: str = ""
    """Submitting: where the job writes checkpoints, the final model and TensorBoard on the cluster (a shared
    filesystem); empty = ``out_dir``'s absolute path."""
    requirements: bool = True
    """Submitting: install agentfly-gym's requirements (without extras) in the job's runtime env on top of the cluster's
    packages; off when the cluster image has them (better for ALFWorld, whose fast-downward-textworld builds from
    source)."""
    runtime_env: dict[str, Any] = msgspec.field(default_factory=dict)
    """Submitting: merged over the generated Ray runtime env (``env_vars`` key by key)."""
    submit_args: list[str] = msgspec.field(default_factory=list)
    """Submitting: more ``ray job submit`` arguments (e.g. ``["--no-wait"]``)."""
    extra_args: list[str] = msgspec.field(default_factory=list)
    """Raw ``train_ppo_ray`` arguments appended last (later flags win), e.g. ``["--ds.adam_offload",
    "--actor.lr_scheduler", "cosine_with_min_lr"]``."""

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

    @property
    def remote(self) -> bool:
        """Submitted to a cluster (``ray_address``), the job loads the model there."""
        return bool(self.ray_address)

    def problem(self, run: Config) -> str | None:
        """What OpenRLHF would reject (or silently mishandle) in this layout for ``run``, or None."""
        for where, variables in (("env_vars", self.env_vars), ("runtime_env", self.runtime_env.get("env_vars", {}))):
            for name in variables if isinstance(variables, dict) else ():
                if name in PLUGIN_VARIABLES:
                    return (
                        f"openrlhf.{where} sets {name}, which the plug-in does not read (its settings are in the file the "
                        f"launcher writes): set {PLUGIN_VARIABLES[name]}"
                    )
        colocated = self.colocated
        if "all" in colocated and self.async_train:
            return (
                "openrlhf.async_train generates while DeepSpeed trains, so vLLM needs GPUs of its own: set openrlhf.colocate "
                'to "actor-ref" (or "none") and give the engines their GPUs, or turn async_train off'
            )
        engine_gpus = self.vllm_engines * self.vllm_tensor_parallel
        if "all" in colocated and engine_gpus != self.actor_gpus:
            return (
                f"openrlhf.colocate = all puts the vLLM engines on the actor's GPUs: vllm_engines x vllm_tensor_parallel "
                f"({engine_gpus}) must equal num_nodes x gpus_per_node ({self.actor_gpus})"
            )
        actor_layout = (self.num_nodes, self.gpus_per_node)
        if colocated & {"all", "actor-ref"} and run.algorithm.kl_coef > 0 and self.ref_layout != actor_layout:
            return "a colocated reference model needs the actor's layout: leave openrlhf.ref_num_nodes/ref_gpus_per_node at 0"
        if "all" in colocated and run.algo_spec.critic and self.critic_layout != actor_layout:
            return (
                'with openrlhf.colocate = "all" the critic shares the actor\'s GPUs: leave openrlhf.critic_num_nodes/'
                "critic_gpus_per_node at 0"
            )
        if "critic-reward" in colocated and not run.algo_spec.critic:
            return f'openrlhf.colocate "{self.colocate}" places a critic, but {run.algo} has none (algorithms with one: {_critics()})'
        # OpenRLHF's own checks, which it makes only after Ray and the models have started.
        rollout_micro = self.rollout_micro_batch_size or run.train.micro_batch_size
        if run.episodes_per_step // rollout_micro < self.actor_gpus:
            return (
                f"every actor GPU needs a micro-batch of rollouts: episodes per step ({run.episodes_per_step}) / rollout micro-batch "
                f"({rollout_micro}) must be at least the actor's {self.actor_gpus} GPUs"
            )
        batch = run.train.mini_batch_size or run.episodes_per_step
        groups = [("actor", self.actor_gpus)]
        if run.algo_spec.critic:
            groups.append(("critic", self.critic_layout[0] * self.critic_layout[1]))
        for role, gpus in groups:
            if batch % (run.train.micro_batch_size * gpus):
                return (
                    f"DeepSpeed splits a training batch of {batch} episodes (train.mini_batch_size, or the episodes per step) "
                    f"into micro-batches of {run.train.micro_batch_size} (train.micro_batch_size) on each of the {role}'s {gpus} "
                    f"GPUs: it must be a multiple of {run.train.micro_batch_size * gpus}"
                )
        # OpenRLHF splits its dataset argument on "," (several files) and "@" (a data dir).
        if any(char in run.out_dir for char in ",@"):
            return f"out_dir {run.out_dir!r} holds the prompt files OpenRLHF reads; it must not contain ',' or '@'"
        return None


def _critics() -> str:
    """The algorithms with a critic, named."""
    return ", ".join(name for name, algorithm in ALGORITHMS.items() if algorithm.critic)
