"""The vLLM generator, for GPU machines with vLLM installed (imported only when asked for).

It speaks token ids both ways (``TokensPrompt`` in, ``token_ids`` out), keeps stop strings in the
output so the rollout's bookkeeping matches the transformers generator, asks for the sampled token's
log-prob (``logprobs=0``) under the processed (temperature-scaled) distribution, and seeds every
request. The local backend pushes its weights after each optimiser step through
:class:`WeightSyncExtension`, a vLLM worker extension (``collective_rpc``).

Untested on the development machine (no GPU there); the request and answer mapping is covered by a
test with a stand-in ``vllm`` module.

Example:
    >>> generator = VLLMGenerator("/models/policy", gpu_memory_utilization=0.3)  # doctest: +SKIP
    >>> outputs = generator.generate([GenerationRequest([1, 2, 3], 16, seed=0)], SamplingParams(16))  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from agentfly_train.generation import Generation, GenerationRequest, SamplingParams


class WeightSyncExtension:
    """Mixed into vLLM's worker (``worker_extension_cls``): loads weights sent by the trainer."""

    def agentfly_load_weights(self, named_tensors: list[tuple[str, Any]]) -> None:
        device = next(self.model_runner.model.parameters()).device  # type: ignore[attr-defined]
        self.model_runner.model.load_weights(weights=[(n, t.to(device)) for n, t in named_tensors])  # type: ignore[attr-defined]


class VLLMGenerator:
    """Continues token contexts with a vLLM engine in this process.

    Args:
        model_path: A transformers model folder vLLM can load.
        gpu_memory_utilization: vLLM's share of GPU memory (leave room for training on the same GPU).
        dtype: vLLM's weight dtype.
        seed: The engine seed.
        **engine_args: More ``vllm.LLM`` arguments.
    """

    def __init__(
        self,
        model_path: str,
        *,
        gpu_memory_utilization: float = 0.4,
        dtype: str = "bfloat16",
        seed: int = 0,
        **engine_args: Any,
    ) -> None:
        try:
            import vllm
        except ImportError as error:
            raise RuntimeError(
                "rollout.generator = 'vllm' needs vLLM on a GPU machine: pip install '.[openrlhf]'"
            ) from error
        self._vllm = vllm
        self.llm = vllm.LLM(
            model=model_path,
            gpu_memory_utilization=gpu_memory_utilization,
            dtype=dtype,
            seed=seed,
            logprobs_mode="processed_logprobs",
            worker_extension_cls=f"{__name__}.WeightSyncExtension",
            **engine_args,
        )

    @classmethod
    def for_trainer(cls, policy: Any, tokenizer: Any, config: Any) -> VLLMGenerator:
        """A generator for the local backend: starts from the policy's weights (saved to the run dir)."""
        folder = os.path.join(config.out_dir, "vllm-init")
        policy.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return cls(folder, seed=config.seed, dtype=config.model.dtype)

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams) -> list[Generation]:
        """Continue every request; see :class:`~agentfly_train.generation.Generator`."""
        results = [Generation() for _ in requests]
        live = [i for i, r in enumerate(requests) if min(r.max_new_tokens, params.max_new_tokens) > 0]
        if not live:
            return results
        vllm = self._vllm
        prompts = [vllm.inputs.TokensPrompt(prompt_token_ids=list(requests[i].token_ids)) for i in live]
        sampling = [
            vllm.SamplingParams(
                n=1,
                temperature=params.temperature,
                top_p=params.top_p,
                top_k=params.top_k if params.top_k > 0 else -1,
                max_tokens=min(requests[i].max_new_tokens, params.max_new_tokens),
                stop=list(params.stop),
                stop_token_ids=list(params.stop_token_ids),
                include_stop_str_in_output=True,
                logprobs=0,
                seed=requests[i].seed,
                detokenize=bool(params.stop),
            )
            for i in live
        ]
        for index, output in zip(live, self.llm.generate(prompts, sampling, use_tqdm=False), strict=True):
            results[index] = to_generation(output.outputs[0])
        return results

    def update_weights(self, named_tensors: Iterable[tuple[str, Any]]) -> None:
        """Load new weights into the engine (after an optimiser step)."""
        self.llm.collective_rpc("agentfly_load_weights", args=([(n, t.detach().cpu()) for n, t in named_tensors],))


def to_generation(completion: Any) -> Generation:
    """A vLLM ``CompletionOutput`` as a :class:`Generation`."""
    token_ids = list(completion.token_ids)
    logprobs = [float(step[token].logprob) for step, token in zip(completion.logprobs or [], token_ids, strict=False)]
    if completion.finish_reason == "length":
        reason = "length"
    elif isinstance(completion.stop_reason, str):
        reason = "stop_string"
    else:
        reason = "stop"
    return Generation(token_ids=token_ids, logprobs=logprobs, finish_reason=reason)
