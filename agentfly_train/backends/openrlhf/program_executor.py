"""Agent programs as an OpenRLHF 0.11.2 agent: the executor the plug-in's agent file hands to OpenRLHF.

With ``agentfly-train --backend openrlhf --agent PATH.py:FUNC`` (or ``--agent-command CMD``) OpenRLHF loads the agent
file the launcher writes (``agentfly_agent.py``: :class:`ProgramExecutor` bound to the run's settings file, see
:mod:`~agentfly_train.backends.openrlhf.settings`) in every vLLM rollout actor and calls, for each sample of a
prompt row,
``await executor.execute(prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine, images)``, which
returns one row. For that sample :class:`ProgramExecutor`:

1. resets an env leased from this process's pool to the label's task (the label, the run's turn limit and the
   pools are the env loop's: :class:`~agentfly_train.backends.openrlhf.executor.EpisodeLabel`,
   :func:`~agentfly_train.backends.openrlhf.executor.env_pool`);
2. opens an episode on the token-exact gateway (:class:`~agentfly_train.gateway.Gateway`), one per event loop
   and sampling setup, started on first use and sampling with OpenRLHF's own engine (:class:`EngineGenerator`);
3. runs the program against the episode's own base URL, then scores its answer with the env, exactly as the
   local backend does (:func:`~agentfly_train.agents.play_agent_episode`);
4. returns the episode's row in the shape of OpenRLHF's ``MultiTurnAgentExecutor.execute``
   (:func:`openrlhf_row`).

What the row holds:
    * ``observation_tokens``: the episode's row as the gateway recorded it (the first call's prompt, then each
      sampled completion and the prompt tokens the next call added); ``action_ranges``: exactly the sampled
      tokens; ``rollout_log_probs`` (when OpenRLHF asks for log-probs): theirs, 0.0 elsewhere.
    * ``reward`` and ``scores``: the env's reward for the program's answer (or the float the program returned).
    * ``prompt``, ``label``, ``images``: OpenRLHF's own, echoed (its evaluation groups results by prompt).
    * ``extra_logs``: the env loop's keys (:func:`~agentfly_train.backends.openrlhf.executor.episode_logs`; ``turns``
      counts model calls; ``tool/<name>/...`` counts the calls the episode's env recorded, the program's calls of
      the env's tools over MCP, zeros when it made none) plus ``rows``, ``rows_dropped`` and
      ``prefix_mismatches``.

Several rows: OpenRLHF takes one sequence per sample, so an episode whose calls did not continue one conversation
(a sub-agent's own conversation, a history the program edited) returns its row with the most sampled tokens (the
first of those on a tie); ``rows_dropped`` counts the others, which are not trained on.

A failed episode (the program raised, ran past ``agent.timeout_s`` or never called the model; the env died)
does not fail the rollout: its row comes back with reward 0 and ``failed = 1``; the reason is logged. OpenRLHF has
no way to leave a sample out of the update (the local backend does), so it is trained as the env loop's plug-in
trains an episode whose env died: its sampled tokens at reward 0. Taking its action ranges away instead would make
a micro-batch of failed samples a 0/0 in OpenRLHF's masked loss. One that never sampled (its program failed before
its first call) is OpenRLHF's prompt with no action token, as OpenRLHF's own over-long prompts are.

Settings are the env loop's (:class:`~agentfly_train.backends.openrlhf.settings.Settings`), whose ``agent`` is the
run's ``[agent]`` section. The gateway samples every call at OpenRLHF's temperature and top-p
(``Settings.top_k`` or OpenRLHF's top-k), whatever the program asks for; a call gets at most
``Settings.max_turn_tokens`` (else OpenRLHF's ``max_tokens``); prompt plus completion fit in ``max_length``, and
so do the episode's rows together (the episode's budget, as on the local backend: past it the episode ends
truncated and its answer is not scored).

A program runs in the rollout actor's process (a sync one in a thread), a command as a child process of it:
paths in them are read on the node that runs the actor.

Example:
    What OpenRLHF's rollout actor does with it, for one sample (``engine`` is the actor)::

        executor = ProgramExecutor(Settings(agent=AgentConfig(program="/abs/calculator_agent.py:solve")))
        row = await executor.execute(prompt, label, sampling_params, 1024, tokenizer, engine)
        row["observation_tokens"], row["action_ranges"], row["reward"], row["extra_logs"]["rows_dropped"]

    >>> action_ranges([0, 0, 1, 1, 0, 1])
    [(2, 4), (5, 6)]
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import secrets
import weakref
from collections.abc import Sequence
from typing import Any

from openrlhf.utils.agent import AgentExecutorBase

from agentfly_train.agents import load_agent, play_agent_episode
from agentfly_train.backends.openrlhf.executor import EpisodeLabel, env_pool, episode_logs
from agentfly_train.backends.openrlhf.settings import Settings, SettingsFile
from agentfly_train.gateway import EpisodeCounters, Gateway, GatewaySettings, Row
from agentfly_train.generation import Generation, GenerationRequest, SamplingParams
from agentfly_train.generation.vllm import to_generation, to_sampling_params
from agentfly_train.rollout import Episode

logger = logging.getLogger("agentfly.openrlhf")


class EngineGenerator:
    """OpenRLHF's vLLM engine as an :class:`~agentfly_train.generation.AsyncGenerator`, for the gateway.

    The engine is OpenRLHF's rollout actor (``generate(prompt_token_ids, sampling_params)``, returning vLLM's
    ``RequestOutput``); requests are mapped as the project's own vLLM generators map them (seeded, stop strings
    kept, the sampled tokens' log-probs asked for).

    Args:
        engine: The actor OpenRLHF passes as ``llm_engine``.
        max_model_len: The context a request may fill (OpenRLHF's ``max_length``).
    """

    def __init__(self, engine: Any, max_model_len: int) -> None:
        import vllm  # in a rollout actor, vLLM is loaded already

        self._vllm = vllm
        self.engine = engine
        self.max_model_len = max_model_len

    async def agenerate(self, request: GenerationRequest, params: SamplingParams) -> Generation:
        """Continue one request on the engine (the engine batches concurrent requests itself)."""
        pair = to_sampling_params(self._vllm, request, params, self.max_model_len)
        if pair is None:
            return Generation()
        output = await self.engine.generate(list(request.token_ids), pair[1])
        return to_generation(output.outputs[0])

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams) -> list[Generation]:
        """Not served: the engine lives on the rollout actor's event loop, so only :meth:`agenerate` reaches it
        (the gateway's scheduler sends every request there)."""
        raise TypeError("EngineGenerator answers on the rollout actor's event loop only: use agenerate")


# A gateway serves from the event loop that started it; a rollout actor keeps one loop for its lifetime.
_GATEWAYS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Any, asyncio.Future[Gateway]]] = (
    weakref.WeakKeyDictionary()
)


def gateway_settings(sampling_params: Any, max_length: int, tokenizer: Any, settings: Settings) -> GatewaySettings:
    """How the gateway answers the calls of a sample that OpenRLHF gives ``sampling_params`` and ``max_length``.

    Example:
        >>> from types import SimpleNamespace
        >>> sampling = SimpleNamespace(temperature=0.7, top_p=1.0, top_k=-1, max_tokens=256)
        >>> gateway = gateway_settings(sampling, 2048, SimpleNamespace(name_or_path="m"), Settings(max_turn_tokens=64))
        >>> sampled = gateway.sampling
        >>> gateway.max_model_len, sampled.max_new_tokens, sampled.temperature, sampled.top_k, gateway.fixed_sampling
        (2048, 64, 0.7, 0, True)
    """
    return GatewaySettings(
        model=getattr(tokenizer, "name_or_path", "") or GatewaySettings.model,
        max_model_len=max_length,  # the engine's context: OpenRLHF starts it with max_len
        max_episode_tokens=max_length,  # --data.max_len is rollout.max_episode_tokens, as the local gateway has it
        sampling=SamplingParams(
            max_new_tokens=settings.max_turn_tokens or sampling_params.max_tokens or max_length,
            temperature=sampling_params.temperature,
            top_p=sampling_params.top_p,
            top_k=settings.top_k or max(sampling_params.top_k, 0),  # vLLM's "off" is -1 (or 0)
        ),
        fixed_sampling=True,  # OpenRLHF scores the sampled tokens at its own temperature
    )


async def engine_gateway(engine: Any, tokenizer: Any, settings: GatewaySettings) -> Gateway:
    """This event loop's gateway over ``engine`` answering with ``settings``, started on first use (training and
    evaluation sample differently, so each gets its own)."""
    gateways = _GATEWAYS.setdefault(asyncio.get_running_loop(), {})
    key = (id(engine), settings)
    starting = gateways.get(key)
    if starting is None:
        gateway = Gateway(EngineGenerator(engine, settings.max_model_len), tokenizer, settings)
        starting = gateways[key] = asyncio.ensure_future(_started(gateway))
    try:
        return await asyncio.shield(starting)  # a cancelled sample leaves the start to the others waiting on it
    except Exception:
        if gateways.get(key) is starting:  # the next sample tries again
            del gateways[key]
        raise


async def _started(gateway: Gateway) -> Gateway:
    await gateway.start()
    return gateway


async def close_gateways() -> None:
    """Stop the running loop's gateways (their episodes' late calls are refused)."""
    started = _GATEWAYS.pop(asyncio.get_running_loop(), {})
    for gateway in await asyncio.gather(*started.values(), return_exceptions=True):
        if isinstance(gateway, Gateway):
            await gateway.stop()


def action_ranges(mask: Sequence[int]) -> list[tuple[int, int]]:
    """The runs of 1s in an action mask as ``(start, end)`` spans: OpenRLHF's ``action_ranges``."""
    ranges, position = [], 0
    for bit, run in itertools.groupby(mask):
        length = len(list(run))
        if bit:
            ranges.append((position, position + length))
        position += length
    return ranges


def openrlhf_row(
    episode: Episode,
    prompt: str,
    label: Any,
    images: Any,
    prompt_ids: list[int],
    *,
    logprobs: bool,
    tools: Sequence[str] = (),
) -> dict[str, Any]:
    """A played episode as OpenRLHF's ``execute`` returns a sample (see the module docstring).

    Args:
        episode: The episode, played by :func:`~agentfly_train.agents.play_agent_episode`.
        prompt: OpenRLHF's prompt text; ``label`` and ``images``: its own, echoed.
        prompt_ids: The tokens of a failed episode that has no row (OpenRLHF's prompt, tokenized).
        logprobs: Whether OpenRLHF asked for the sampled tokens' log-probs (``rollout_log_probs``).
        tools: The tools whose calls the logs count (``Settings.tools``).
    """
    row = max(episode.rows, key=lambda r: sum(r.action_mask), default=None)  # max keeps the first of a tie
    failed = episode.failure is not None
    if row is None:
        row = Row(token_ids=list(prompt_ids), action_mask=[0] * len(prompt_ids), logprobs=[0.0] * len(prompt_ids))
    reward = 0.0 if failed else float(episode.reward)
    counters = episode.calls or EpisodeCounters()
    return {
        "prompt": prompt,
        "label": label,
        "images": images,
        "mm_train_inputs": None,
        "reward": reward,
        "scores": reward,
        "observation_tokens": list(row.token_ids),
        "action_ranges": action_ranges(row.action_mask),
        "rollout_log_probs": list(row.logprobs) if logprobs else None,
        "truncated": bool(counters.cut_calls),  # a call ended at its budget or the context window
        "extra_logs": {
            **episode_logs(episode, tools),
            "rows": float(len(episode.rows)),
            "rows_dropped": float(max(len(episode.rows) - 1, 0)),
            "prefix_mismatches": float(counters.prefix_mismatches),
        },
    }


class ProgramExecutor(AgentExecutorBase, SettingsFile):
    """Plays each OpenRLHF sample with the run's agent program (``Settings.agent``); see the module docstring.

    Args:
        settings: The plug-in's settings; without them (OpenRLHF's ``AgentExecutor()``), those of the file the
            class is bound to (``ProgramExecutor.bound(path)``, what the generated agent file exposes), else the
            :class:`~agentfly_train.backends.openrlhf.settings.Settings` defaults, which name no program.

    Raises:
        ValueError: The settings name no program or command, or name one that cannot be loaded.
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = self.settings_or_file(settings)
        if not self.settings.agent.plays:
            where = f"the settings file {self.settings_file}" if self.settings_file else "Settings() (no settings file)"
            raise ValueError(
                f"the program executor plays an agent program: the settings' agent must name one, like "
                f'{{"program": "/abs/agent.py:solve"}} or {{"command": "python /abs/agent.py"}} (agentfly-train '
                f"--backend openrlhf --agent ... writes it), and {where} has none; the env loop's executor is "
                "agentfly_train.backends.openrlhf.executor.AgentExecutor"
            )
        self.agent = load_agent(self.settings.agent)
        # A sync program holds a thread for its episode, and the env pool bounds the episodes in flight; twice that
        # leaves room for threads abandoned past their time limit.
        self.threads = concurrent.futures.ThreadPoolExecutor(
            2 * self.settings.pool_size, thread_name_prefix="agentfly-agent"
        )

    async def execute(
        self,
        prompt: str,
        label: Any,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        llm_engine: Any,
        images: Any = None,
    ) -> dict[str, Any]:
        task = EpisodeLabel.parse(label)
        gateway = await engine_gateway(
            llm_engine, hf_tokenizer, gateway_settings(sampling_params, max_length, hf_tokenizer, self.settings)
        )
        # A label without a seed plays a random task; the program is told which.
        episode = Episode(group=0, chain=0, seed=task.seed if task.seed is not None else secrets.randbelow(2**31))
        lease = await env_pool(task, self.settings).acquire(timeout=self.settings.lease_timeout_s)
        try:
            await play_agent_episode(lease.resource, episode, self.agent, gateway, self.settings.agent, self.threads)
        except BaseException:  # cancelled: the env may be mid-episode
            await lease.release(broken=True)
            raise
        await lease.release(broken=episode.failure is not None)  # a failed episode's env may be in any state
        if episode.failure is not None:
            logger.warning("episode of %s (seed %s) failed: %s", task.env_id, episode.seed, episode.failure)
        prompt_ids = [] if episode.rows else hf_tokenizer(prompt, add_special_tokens=False)["input_ids"]
        return openrlhf_row(
            episode,
            prompt,
            label,
            images,
            prompt_ids,
            logprobs=sampling_params.logprobs is not None,
            tools=self.settings.tools,
        )
