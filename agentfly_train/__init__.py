"""agentfly_train: masked multi-turn PPO / GRPO / RLOO / REINFORCE++ on AgentFly envs.

The pieces every backend shares: :mod:`~agentfly_train.config` (one config, TOML plus flags),
:mod:`~agentfly_train.algorithms` (OpenRLHF's estimators and losses), :mod:`~agentfly_train.rollout`
(token-faithful multi-turn episodes), :mod:`~agentfly_train.generation` (generators) and
:mod:`~agentfly_train.dataset` (tasks as prompt files). The ``local`` backend
(:mod:`agentfly_train.backends.local`) trains in one process on CPU or one GPU; ``agentfly-train``
(:mod:`~agentfly_train.cli`) runs it. Importing this package loads no torch.

Example:
    >>> from agentfly_train.config import Config
    >>> Config().algo, Config().estimator
    ('grpo', 'group_norm')
"""

__version__ = "0.1.0"
