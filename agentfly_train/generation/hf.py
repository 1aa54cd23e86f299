"""The transformers generator: batched sampling with a KV cache, on CPU or one GPU.

It samples with its own loop rather than ``model.generate`` because the trainer needs, for every
sampled token, its log-prob under exactly the distribution it was drawn from, per-request budgets and
seeds, and stop strings that keep the token that completed them. Contexts are left-padded into one
batch; finished rows leave the batch (and the KV cache) as soon as they end, so a few long answers do
not keep the whole batch busy.

Each request samples with its own seeded generator (inverse-CDF draws), so what an episode generates
does not depend on which other episodes share its batch.

Example:
    >>> generator = TransformersGenerator(model, tokenizer)  # doctest: +SKIP
    >>> [out] = generator.generate([GenerationRequest([1, 2, 3], 8, seed=0)], SamplingParams(8))  # doctest: +SKIP
    >>> len(out.token_ids) <= 8  # doctest: +SKIP
    True
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from agentfly_train.generation import Generation, GenerationRequest, SamplingParams
from agentfly_train.models import pad_id


class TransformersGenerator:
    """Samples continuations from a transformers causal LM.

    Args:
        model: The policy (a ``PreTrainedModel`` with a causal LM head); shared with the trainer, so
            generation always uses the current weights.
        tokenizer: Its tokenizer (for stop strings and the pad id).
    """

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.pad_id = pad_id(tokenizer, fallback=0)
        #: The context it holds: the model's max positions (None when its config does not say).
        self.max_model_len: int | None = getattr(model.config, "max_position_embeddings", None)
        #: Tokens generated and seconds spent, for throughput metrics.
        self.tokens_generated = 0
        self.seconds = 0.0

    @torch.no_grad()
    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams) -> list[Generation]:
        """Continue every request; see :class:`~agentfly_train.generation.Generator`."""
        started = time.perf_counter()
        results = [Generation() for _ in requests]
        budgets = [min(r.max_new_tokens, params.max_new_tokens) for r in requests]
        live = [i for i, budget in enumerate(budgets) if budget > 0]
        if not live:
            return results
        device = next(self.model.parameters()).device
        rngs = {i: torch.Generator().manual_seed(int(requests[i].seed) % (2**63)) for i in live}
        stop_ids = set(params.stop_token_ids)
        window = max((len(s) for s in params.stop), default=0) + 2  # tokens enough to hold any stop string

        input_ids, attention_mask = self._left_pad([requests[i].token_ids for i in live], device)
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        was_training = self.model.training
        self.model.eval()
        try:
            from transformers import DynamicCache

            cache = DynamicCache(config=self.model.config)
            out = self.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            next_positions = position_ids[:, -1] + 1
            while True:
                logits = out.logits[:, -1, :].float()
                tokens, logprobs = self._sample(logits, params, [rngs[i] for i in live])
                keep: list[int] = []
                for row, request_index in enumerate(live):
                    token = int(tokens[row])
                    result = results[request_index]
                    result.token_ids.append(token)
                    result.logprobs.append(float(logprobs[row]))
                    if token in stop_ids:
                        result.finish_reason = "stop"
                    elif params.stop and self._hit_stop(result.token_ids, params.stop, window):
                        result.finish_reason = "stop_string"
                    elif len(result.token_ids) >= budgets[request_index]:
                        result.finish_reason = "length"
                    else:
                        keep.append(row)
                if not keep:
                    break
                if len(keep) < len(live):
                    index = torch.tensor(keep, device=device)
                    cache.reorder_cache(index)  # drops the finished rows from the KV cache
                    attention_mask, tokens, next_positions = attention_mask[index], tokens[index], next_positions[index]
                    live = [live[row] for row in keep]
                attention_mask = torch.cat([attention_mask, attention_mask.new_ones((len(live), 1))], dim=1)
                out = self.model(
                    input_ids=tokens.unsqueeze(1).to(device),
                    attention_mask=attention_mask,
                    position_ids=next_positions.unsqueeze(1),
                    past_key_values=out.past_key_values,
                    use_cache=True,
                )
                next_positions = next_positions + 1
        finally:
            self.model.train(was_training)
        self.tokens_generated += sum(len(r.token_ids) for r in results)
        self.seconds += time.perf_counter() - started
        return results

    def _left_pad(self, contexts: list[list[int]], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(c) for c in contexts)
        ids = torch.full((len(contexts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, context in enumerate(contexts):
            ids[row, width - len(context) :] = torch.tensor(context, dtype=torch.long)
            mask[row, width - len(context) :] = 1
        return ids.to(device), mask.to(device)

    @staticmethod
    def _sample(
        logits: torch.Tensor, params: SamplingParams, rngs: list[torch.Generator]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw one token per row; return the tokens and their log-probs at the sampling temperature.

        Temperature 0 is greedy (log-probs at temperature 1).
        """
        if params.temperature <= 0:
            tokens = logits.argmax(-1)
            return tokens, torch.log_softmax(logits, dim=-1).gather(1, tokens.unsqueeze(1)).squeeze(1)
        logprobs = torch.log_softmax(logits / params.temperature, dim=-1)
        probs = logprobs.exp()
        if params.top_k and params.top_k < probs.size(-1):
            kth = probs.topk(params.top_k, dim=-1).values[:, -1:]
            probs = probs.masked_fill(probs < kth, 0.0)
        if params.top_p < 1.0:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            before = sorted_probs.cumsum(-1) - sorted_probs
            drop = before > params.top_p * sorted_probs.sum(-1, keepdim=True)  # the smallest set reaching top_p
            probs = probs.scatter(-1, order, sorted_probs.masked_fill(drop, 0.0))
        probs = probs.cpu().double()
        cdf = probs.cumsum(-1)
        draws = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in rngs]).unsqueeze(1) * cdf[:, -1:]
        tokens = torch.searchsorted(cdf, draws).squeeze(1).clamp(max=probs.size(-1) - 1)
        # A draw of exactly 0 can land on a leading zero-probability token: take the first possible one.
        impossible = probs.gather(1, tokens.unsqueeze(1)).squeeze(1) == 0
        tokens = torch.where(impossible, (probs > 0).long().argmax(-1), tokens).to(logits.device)
        return tokens, logprobs.gather(1, tokens.unsqueeze(1)).squeeze(1)

    def _hit_stop(self, token_ids: list[int], stops: Sequence[str], window: int) -> bool:
        tail = self.tokenizer.decode(token_ids[-window:], skip_special_tokens=False)
        return any(stop in tail for stop in stops)
