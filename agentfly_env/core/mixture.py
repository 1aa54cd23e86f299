"""Several envs as one: ``AgentFly/Mix-v0`` plays each episode on one of its component envs.

A training run that mixes tasks (arithmetic with a calculator, retrieval QA, shopping) needs batches
that mix them, and every episode driver (the local rollout, evaluation, the OpenRLHF plug-in, Ray
actors) already knows how to play one env id. So the mixture is an env: at each reset it draws a
component from the reset seed, by weight, and resets that component with the same seed. Two resets
with one seed give the same component and the same task (the chains of a GRPO group share a task);
consecutive seeds give the weighted mix.

Everything the episode reports is the component's own: its observation, its system prompt and tool
schemas (``info["start"]``), its step records, its trajectory. The trajectory's ``env_id`` names the
component (its ``name`` when given, else its id), which is what per-env metrics group by.

Components are made on first use, so a pool of mixtures builds only the envs its episodes play.
Keyword arguments other than ``envs`` are shared: they go to every component (``split="eval"`` for
evaluation, a common ``max_turns``), under the component's own options.

Example:
    >>> import gymnasium as gym, agentfly_env
    >>> env = gym.make("AgentFly/Mix-v0", envs=[
    ...     {"id": "AgentFly/Math-v0", "name": "arithmetic", "options": {"dataset": "basic_arithmetic"}},
    ...     {"id": "AgentFly/Math-v0", "name": "countdown", "weight": 3, "options": {"dataset": "countdown"}}])
    >>> picked = [env.reset(seed=seed)[1]["env_id"] for seed in range(400)]
    >>> 0.65 < picked.count("countdown") / 400 < 0.85
    True
    >>> env.reset(seed=7)[0] == env.reset(seed=7)[0]
    True
    >>> env.close()
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from agentfly_env.core import policies
from agentfly_env.core.env import AgentEnv, EnvStateError
from agentfly_env.registration import MIXTURE_ID

__all__ = ["MIXTURE_ID", "MixtureEnv"]

#: A component's keys; anything else in one is a mistake worth naming.
COMPONENT_KEYS = frozenset({"id", "name", "weight", "options"})
# Mixed into the seed of the component draw, so it is not correlated with the component's own use of the seed.
_DRAW_STREAM = 0x6D6978


class MixtureEnv(AgentEnv):
    """Plays each episode on one of several envs, drawn by weight from the reset seed.

    Args:
        envs: The components: mappings with ``id`` (a registered env id), ``weight`` (default 1),
            ``name`` (what trajectories and metrics call it; default the id; required to tell apart two
            components of one id) and ``options`` (keyword arguments for ``gym.make``).
        env_id: The mixture's own id (set by ``gym.make``).
        render_mode: As every env's; passed to the components.
        shared_options: Keyword arguments for every component, under each one's own ``options``.

    Raises:
        ValueError: no components, an unknown key, a weight that is not positive, or two components
            with one name.
    """

    def __init__(
        self,
        envs: Sequence[Mapping[str, Any]] = (),
        *,
        env_id: str | None = None,
        render_mode: str | None = None,
        **shared_options: Any,
    ) -> None:
        super().__init__(env_id=env_id or MIXTURE_ID, render_mode=render_mode)
        if render_mode is not None:
            shared_options["render_mode"] = render_mode
        if not envs:
            raise ValueError(f"{self.env_id}: give at least one component env: envs=[{{'id': ...}}, ...]")
        self.components: list[dict[str, Any]] = []
        for number, component in enumerate(envs):
            unknown = set(component) - COMPONENT_KEYS
            if unknown or "id" not in component:
                raise ValueError(
                    f"{self.env_id}: component {number} needs an 'id' and takes only {sorted(COMPONENT_KEYS)}; "
                    f"got {sorted(component)}"
                )
            weight = float(component.get("weight", 1.0))
            if not weight > 0:
                raise ValueError(f"{self.env_id}: component {number} ({component['id']}) has weight {weight}; give > 0")
            options = {**dict(component.get("options", {})), **shared_options}
            name = component.get("name") or component["id"]
            self.components.append({"id": component["id"], "name": name, "weight": weight, "options": options})
        names = [c["name"] for c in self.components]
        if len(set(names)) < len(names):
            raise ValueError(f"{self.env_id}: components share a name ({names}); give each a distinct 'name'")
        weights = np.array([c["weight"] for c in self.components])
        self.weights = weights / weights.sum()
        self._envs: dict[int, gym.Env] = {}
        #: The component playing the current episode (None before the first reset).
        self.active: AgentEnv | None = None

    def component_index(self, seed: int | None) -> int:
        """Which component plays the episode of ``seed`` (None: drawn from the env's own generator)."""
        rng = self.np_random if seed is None else np.random.default_rng([_DRAW_STREAM, seed])
        return int(rng.choice(len(self.components), p=self.weights))

    def _component(self, index: int) -> AgentEnv:
        if index not in self._envs:
            component = self.components[index]
            env_id = component["name"]  # what the component records as its env id
            self._envs[index] = gym.make(component["id"], **{**component["options"], "env_id": env_id})
        return self._envs[index].unwrapped

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        if self._closed:
            raise EnvStateError(f"{self.env_id}: reset() after close()")
        gym.Env.reset(self, seed=seed)
        chosen = self._component(self.component_index(seed))
        if self.active is not None and self.active is not chosen:
            await self.active._finish_episode()  # release what the other component's episode holds
        self.active = chosen
        observation, info = await chosen.areset(seed=seed, options=options)
        self._mirror()
        self._needs_reset = False
        return observation, info

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.active is None:
            raise EnvStateError(f"{self.env_id}: step() called but the episode has not started; call reset() first")
        result = await self.active.astep(action)
        self._mirror()
        return result

    async def aend_episode(self) -> None:
        if self.active is not None:
            await self.active.aend_episode()
            self._mirror()
        else:
            await super().aend_episode()

    def _mirror(self) -> None:
        """What readers of the mixture see is the active component's state."""
        active = self.active
        assert active is not None
        self.trajectory, self.turn = active.trajectory, active.turn
        self.system_prompt, self.tool_schemas = active.system_prompt, active.tool_schemas
        self.observation_space, self.action_space = active.observation_space, active.action_space
        self._needs_reset = active._needs_reset

    def expert_action(self) -> str:
        """The active component's scripted expert (a random well-formed action for one without)."""
        if self.active is None:
            raise EnvStateError(f"{self.env_id}: no episode yet; call reset() first")
        return policies.expert_action(self.active)

    async def _close(self) -> None:
        for env in self._envs.values():
            await env.unwrapped.aclose()
        self._envs.clear()

    async def _finish_episode(self) -> None:
        if self.active is not None:
            await self.active._finish_episode()

    def render(self) -> str | None:
        return self.active.render() if self.active is not None else None
