"""Generators: turn token contexts into sampled continuations with the sampled tokens' log-probs.

The rollout talks to a :class:`Generator`; what answers is the policy itself through transformers
(:class:`~agentfly_train.generation.hf.TransformersGenerator`, any machine, KV cache, batched) or a
vLLM engine with its own copy of the weights (:mod:`agentfly_train.generation.vllm`, CPU or GPU,
imported only when asked for): batched (``vllm``) or async (``vllm-async``, an
:class:`AsyncGenerator`). All take and return token ids, never text, so the trainer sees exactly what
was sampled. :func:`build_generator` picks one from the run's config.

Example:
    >>> params = SamplingParams(max_new_tokens=16, temperature=0.7, stop=("</answer>",))
    >>> request = GenerationRequest(token_ids=[1, 2, 3], max_new_tokens=8, seed=7)
    >>> min(request.max_new_tokens, params.max_new_tokens)
    8
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from agentfly_train.config import Config, RolloutConfig

FinishReason = Literal["stop", "stop_string", "length"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample.

    Attributes:
        max_new_tokens: Most tokens per request (a request may ask for fewer).
        temperature: Logits are divided by it; the recorded log-probs are those of this distribution.
        top_p: Nucleus sampling (1.0 = off).
        top_k: Top-k sampling (0 = off).
        stop: Strings that end a continuation; the token that completes one is kept.
        stop_token_ids: Tokens that end a continuation (the end-of-turn tokens); kept as generated.
    """

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: Sequence[str] = ()
    stop_token_ids: Sequence[int] = ()

    @classmethod
    def from_rollout(
        cls, rollout: RolloutConfig, *, stop_token_ids: Iterable[int] = (), temperature: float | None = None
    ) -> SamplingParams:
        """The sampling a run's ``[rollout]`` asks for, the one place it is read for the env loop and the gateway
        alike: a turn's budget, the temperature (``temperature`` instead: an evaluation's), top-p, top-k and stop
        strings; ``stop_token_ids`` (the chat template's end-of-turn tokens) end a turn.

        Example:
            >>> from agentfly_train.config import RolloutConfig
            >>> params = SamplingParams.from_rollout(RolloutConfig(max_new_tokens=64, top_k=20), stop_token_ids={2})
            >>> params.max_new_tokens, params.top_k, params.stop_token_ids, params.temperature
            (64, 20, (2,), 1.0)
        """
        return cls(
            max_new_tokens=rollout.max_new_tokens,
            temperature=rollout.temperature if temperature is None else temperature,
            top_p=rollout.top_p,
            top_k=rollout.top_k,
            stop=tuple(rollout.stop),
            stop_token_ids=tuple(sorted(stop_token_ids)),
        )


@dataclass
class GenerationRequest:
    """One context to continue.

    Attributes:
        token_ids: The whole context (prompt and earlier turns).
        max_new_tokens: This request's budget (what is left of the episode's).
        seed: Seeds this request's sampling, so a continuation does not depend on its batch-mates.
    """

    token_ids: list[int]
    max_new_tokens: int
    seed: int = 0


@dataclass
class Generation:
    """A sampled continuation.

    Attributes:
        token_ids: The sampled tokens, including a final end-of-turn token when one was sampled.
        logprobs: Log-prob of each sampled token under the temperature-scaled distribution.
        finish_reason: ``stop`` (end-of-turn token), ``stop_string`` or ``length`` (budget reached).
    """

    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: FinishReason = "length"


class Generator(Protocol):
    """Anything that continues token contexts. ``generate`` may block: the rollout runs it in a thread."""

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams) -> list[Generation]:
        """Continue every request; the answers come back in request order."""
        ...


@runtime_checkable
class AsyncGenerator(Generator, Protocol):
    """A generator that also takes requests one at a time, whenever they come, and batches them itself
    (continuous batching): the rollout then sends each episode's turn the moment it is ready."""

    async def agenerate(self, request: GenerationRequest, params: SamplingParams) -> Generation:
        """Continue one request."""
        ...


def generator_kind(name: str) -> str:
    """``rollout.generator`` resolved: ``auto`` is ``vllm`` where vLLM is installed, else ``transformers``."""
    if name != "auto":
        return name
    from agentfly_train.generation.vllm import vllm_installed

    return "vllm" if vllm_installed() else "transformers"


def build_generator(config: Config, model: Any, tokenizer: Any) -> Generator:
    """The generator ``config.rollout.generator`` names, for ``model`` (the policy) and its tokenizer.

    A vLLM engine starts from the policy's current weights (saved once to a scratch folder it loads
    and that is removed after); the trainer then pushes its weights after every optimiser step. An
    engine that cannot start raises :class:`~agentfly_train.generation.vllm.VLLMError` when vLLM was
    asked for, and falls back to transformers, with a warning, when ``auto`` chose it.
    """
    rollout = config.rollout
    kind = generator_kind(rollout.generator)
    if kind != "transformers":
        from agentfly_train.generation.vllm import VLLMError

        try:
            return _vllm_generator(config, kind, model, tokenizer)
        except VLLMError as error:
            if rollout.generator != "auto":
                raise
            # Chosen for the user, not by them: say why, and go on with the generator that needs no engine.
            logging.getLogger("agentfly.train").warning("%s; using the transformers generator", error)
    from agentfly_train.generation.hf import TransformersGenerator

    return TransformersGenerator(model, tokenizer)


def _vllm_generator(config: Config, kind: str, model: Any, tokenizer: Any) -> Generator:
    from agentfly_train.generation.vllm import AsyncVLLMGenerator, VLLMGenerator

    rollout = config.rollout
    engine = VLLMGenerator if kind == "vllm" else AsyncVLLMGenerator
    folder = tempfile.mkdtemp(prefix="agentfly-vllm-init-")
    try:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return engine(
            folder,
            dtype=config.model.dtype if rollout.vllm_dtype == "auto" else rollout.vllm_dtype,
            seed=config.seed,
            # An agent program's calls get the model's context (or the cap set); the env loop's episode is one sequence.
            max_model_len=(config.agent.context_tokens or None) if config.agent.plays else rollout.max_episode_tokens,
            kv_cache_gb=rollout.vllm_kv_cache_gb,
            gpu_memory_utilization=rollout.vllm_gpu_memory_utilization,
            **rollout.vllm_args,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def describe(generator: Generator) -> str:
    """A generator in a few words, for the run's log: ``vllm (float32)``, ``transformers``."""
    args = getattr(generator, "args", None)
    name = {"TransformersGenerator": "transformers", "VLLMGenerator": "vllm", "AsyncVLLMGenerator": "vllm-async"}
    label = name.get(type(generator).__name__, type(generator).__name__)
    return f"{label} ({args['dtype']})" if isinstance(args, dict) and "dtype" in args else label
