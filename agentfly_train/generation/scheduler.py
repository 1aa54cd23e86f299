"""One place where concurrent callers meet the generator: batches for a sync one, straight through for an async one.

Many coroutines (a rollout's episodes, a gateway's HTTP calls) each want one continuation at a time.
A sync :class:`~agentfly_train.generation.Generator` is best fed whole batches, so the scheduler
queues requests and one server loop runs the generator in a worker thread (the event loop stays free
for env steps and HTTP meanwhile). A batch starts at once when every live requester is waiting (or
``max_batch_size`` are), else after ``batch_wait_s`` with whoever is waiting. Requests with different
sampling parameters never share a batch (the generator takes one ``SamplingParams`` per call). An
:class:`~agentfly_train.generation.AsyncGenerator` batches for itself (continuous batching): each
request goes to it the moment it comes.

A requester is whoever may still ask (an episode that is playing, an episode open in the gateway):
``join`` when it starts, ``leave`` when it is done, so the server knows when "everyone is waiting".

Example:
    >>> async def play(scheduler, request, params):  # doctest: +SKIP
    ...     async with scheduler.running():
    ...         scheduler.join()
    ...         try:
    ...             return await scheduler.generate(request, params)
    ...         finally:
    ...             scheduler.leave()
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

from agentfly_train.generation import AsyncGenerator, Generation, GenerationRequest, Generator, SamplingParams

_Pending = tuple[GenerationRequest, SamplingParams, "asyncio.Future[Generation]"]


class GenerationScheduler:
    """Batches requests from concurrent coroutines into a generator.

    Args:
        generator: What samples; an :class:`AsyncGenerator` gets every request directly.
        batch_wait_s: Longest wait for more requesters before a partial batch starts.
        max_batch_size: Most requests per batch.
        on_batch: Called with the seconds of each batch (an async generator: of each busy span, which ends
            when no request is left in it), for the caller's statistics.
    """

    def __init__(
        self,
        generator: Generator,
        *,
        batch_wait_s: float = 0.05,
        max_batch_size: int = 64,
        on_batch: Callable[[float], None] | None = None,
    ) -> None:
        self.generator = generator
        self.batch_wait_s = batch_wait_s
        self.max_batch_size = max_batch_size
        self.on_batch = on_batch or (lambda seconds: None)
        self.direct = isinstance(generator, AsyncGenerator)
        self.live = 0  # requesters that may still ask
        self.pending: list[_Pending] = []
        self.changed = asyncio.Event()
        self.in_flight = 0  # requests inside an async generator
        self.busy_since = 0.0

    def join(self) -> None:
        """A requester starts (it will ask, and the next batch may wait for it)."""
        self.live += 1
        self.changed.set()

    def leave(self) -> None:
        """A requester is done: a batch no longer waits for it."""
        self.live -= 1
        self.changed.set()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[GenerationScheduler]:
        """Run the batching loop (a sync generator's) while the block runs; stop it after."""
        if self.direct:
            yield self
            return
        server = asyncio.create_task(self._serve())
        try:
            yield self
        finally:
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await server

    async def generate(self, request: GenerationRequest, params: SamplingParams) -> Generation:
        """One continuation: from the next batch, or straight from an async generator."""
        if self.direct:
            return await self._send(request, params)
        future: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        self.pending.append((request, params, future))
        self.changed.set()
        return await future

    async def _send(self, request: GenerationRequest, params: SamplingParams) -> Generation:
        """Straight to an async engine; the generator counts as busy while any request is in it."""
        loop = asyncio.get_running_loop()
        if not self.in_flight:
            self.busy_since = loop.time()
        self.in_flight += 1
        try:
            return await self.generator.agenerate(request, params)  # type: ignore[attr-defined]
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self.on_batch(loop.time() - self.busy_since)

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.pending:
                self.changed.clear()
                await self.changed.wait()
                continue
            deadline = loop.time() + self.batch_wait_s
            while len(self.pending) < min(self.live, self.max_batch_size):
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                self.changed.clear()
                try:
                    await asyncio.wait_for(self.changed.wait(), remaining)
                except TimeoutError:
                    break
            await self._run_batch(self._take_batch())

    def _take_batch(self) -> list[_Pending]:
        """The oldest request and those waiting with the same sampling parameters, up to the batch size."""
        params = self.pending[0][1]
        batch = [entry for entry in self.pending if entry[1] == params][: self.max_batch_size]
        taken = {id(entry) for entry in batch}
        self.pending = [entry for entry in self.pending if id(entry) not in taken]
        return batch

    async def _run_batch(self, batch: list[_Pending]) -> None:
        started = time.perf_counter()
        try:
            generations = await asyncio.to_thread(
                self.generator.generate, [request for request, _, _ in batch], batch[0][1]
            )
        except Exception as error:  # the requesters fail with it; the loop serves the next batch
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(error)
            return
        except BaseException:  # cancelled: nobody will answer these
            for _, _, future in batch:
                future.cancel()
            raise
        self.on_batch(time.perf_counter() - started)
        for (_, _, future), generation in zip(batch, generations, strict=True):
            if not future.done():  # a requester may have gone (a client hung up)
                future.set_result(generation)
