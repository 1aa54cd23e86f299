"""The RL algorithms ``agentfly-train`` runs, one record each: everything the config checks and the update does
differently from one algorithm to the next.

The config reads a record to validate a run (a group baseline needs two or more chains per task), the
local backend to build it (a critic or none) and :mod:`agentfly_train.algorithms` to compute its advantages
(which group baseline, discounted or not, normalised over the batch or not); the OpenRLHF backend passes
its ``estimator`` on as OpenRLHF's ``--algo.advantage.estimator``. Adding an algorithm is adding one
:class:`Algorithm` to :data:`ALGORITHMS` (a new group baseline is a function beside the others here).

This module imports no torch (the config is checked before torch loads): the baselines only call the
methods of the tensor they are given.

Example:
    >>> grpo = ALGORITHMS["grpo"]
    >>> grpo.estimator, grpo.min_chains, grpo.critic, ALGORITHMS["ppo"].critic
    ('group_norm', 2, False, True)
    >>> by_estimator("rloo").name
    'rloo'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

# Group baselines: the rewards of each task's chains, ``(groups, chains)``, shaped against the others of the group.


def mean_baseline(grouped: Any) -> Any:
    """The reward minus the group's mean (REINFORCE++-baseline)."""
    return grouped - grouped.mean(-1, keepdim=True)


def leave_one_out_baseline(grouped: Any) -> Any:
    """The reward minus the mean of the group's other chains (RLOO)."""
    return grouped - (grouped.sum(-1, keepdim=True) - grouped) / (grouped.size(-1) - 1)


def normalised_baseline(grouped: Any) -> Any:
    """The reward minus the group's mean, over the group's unbiased (Bessel-corrected) std plus 1e-9, as
    ``torch.std`` and OpenRLHF compute it (GRPO)."""
    return (grouped - grouped.mean(-1, keepdim=True)) / (grouped.std(-1, keepdim=True) + 1e-9)


@dataclass(frozen=True)
class Algorithm:
    """One algorithm: how its advantages are estimated, and what it needs besides the policy.

    Attributes:
        name: What ``algo`` / ``--algo`` calls it.
        estimator: OpenRLHF's name of its advantage estimator (``--algo.advantage.estimator``).
        baseline: Its group baseline (``(groups, chains)`` rewards in, the same shape out), or None where each
            episode's reward stands alone.
        critic: It learns a value model and estimates advantages with GAE (PPO).
        discounted: Returns are discounted by ``algorithm.gamma`` (the others sum rewards undiscounted).
        normalised: Advantages are whitened over every action token of the rollout batch.
        kl_mode: Where the KL to the reference goes under ``algorithm.kl_mode = "auto"``, as OpenRLHF's recipes
            put it: a ``loss`` term or a penalty in the ``reward``.
        step_credit: Each turn's advantage adds a step-level one: the turns of a task's group that start from the
            same state (the same observation), compared by their discounted returns (GiGPO's anchor states). The
            local backend computes it; OpenRLHF has no such estimator.
    """

    name: str
    estimator: str
    baseline: Callable[[Any], Any] | None = None
    critic: bool = False
    discounted: bool = False
    normalised: bool = False
    kl_mode: Literal["loss", "reward"] = "reward"
    step_credit: bool = False

    @property
    def min_chains(self) -> int:
        """Chains per task (``rollout.samples_per_prompt``) it needs: a group baseline compares two or more."""
        return 2 if self.baseline is not None else 1


#: Algorithm name (``algo``, ``--algo``) -> its record.
ALGORITHMS: dict[str, Algorithm] = {
    algorithm.name: algorithm
    for algorithm in (
        Algorithm("ppo", "gae", critic=True, discounted=True, normalised=True),
        Algorithm("grpo", "group_norm", baseline=normalised_baseline, kl_mode="loss"),
        Algorithm("rloo", "rloo", baseline=leave_one_out_baseline),
        Algorithm("reinforce++", "reinforce", discounted=True, normalised=True),
        Algorithm("reinforce++-baseline", "reinforce_baseline", baseline=mean_baseline, normalised=True),
        # GiGPO (arXiv 2505.10978): GRPO's episode-level advantage plus a step-level one over anchor states.
        Algorithm("gigpo", "gigpo", baseline=normalised_baseline, kl_mode="loss", step_credit=True),
    )
}


def by_estimator(estimator: str) -> Algorithm:
    """The algorithm of an advantage estimator (OpenRLHF's name).

    Raises:
        ValueError: no registered algorithm uses it.
    """
    for algorithm in ALGORITHMS.values():
        if algorithm.estimator == estimator:
            return algorithm
    known = tuple(algorithm.estimator for algorithm in ALGORITHMS.values())
    raise ValueError(f"unknown estimator {estimator!r}; choose one of {known}")
