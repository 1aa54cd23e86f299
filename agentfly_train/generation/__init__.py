"""Generators: turn token contexts into sampled continuations with the sampled tokens' log-probs.

The rollout talks to a :class:`Generator`; what answers is the policy itself through transformers
(:class:`~agentfly_train.generation.hf.TransformersGenerator`, any machine, KV cache, batched) or
vLLM on a GPU machine (:class:`~agentfly_train.generation.vllm.VLLMGenerator`, imported only when
asked for). Both take and return token ids, never text, so the trainer sees exactly what was sampled.

Example:
    >>> params = SamplingParams(max_new_tokens=16, temperature=0.7, stop=("</answer>",))
    >>> request = GenerationRequest(token_ids=[1, 2, 3], max_new_tokens=8, seed=7)
    >>> min(request.max_new_tokens, params.max_new_tokens)
    8
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

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
