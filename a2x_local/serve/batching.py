"""Searches from many clients, coalesced: requests for one method that arrive together share a search batch.

Every search method answers a batch in one go (a retriever embeds all queries at once; an LLM method sends one
engine call per round for the whole batch), so a server that ran each request alone would waste that. Requests for
the same method object wait up to a short window (or until the batch is full) and then run as one
``search_batch`` on a worker thread; a few batches of one method may run at once, and their engine rounds merge
again in :class:`~a2x_local.serve.rounds.SharedRounds`. Each request has its own time-out, and a batch that fails is
answered request by request, so one bad request or failed model call fails only itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from a2x_local.search import SearchAnswer, SearchMethod, SearchRequest
from a2x_local.serve.errors import TimedOut

Outcome = SearchAnswer | Exception


@dataclass
class _Waiting:
    request: SearchRequest
    future: asyncio.Future[Outcome]


@dataclass
class _Queue:
    """The requests waiting for one method object, and its batches running now."""

    method: SearchMethod
    slots: asyncio.Semaphore
    scope: Callable[[], AbstractContextManager[object]] | None = None
    pending: list[_Waiting] = field(default_factory=list)
    full: asyncio.Event = field(default_factory=asyncio.Event)
    running: int = 0
    flusher: asyncio.Task[None] | None = None


def run_isolated(method: SearchMethod, requests: Sequence[SearchRequest],
                 scope: Callable[[], AbstractContextManager[object]] | None = None) -> list[Outcome]:
    """The batch's answers; when the batch raises, each request alone, so the error stays with its request.
    ``scope`` wraps the work (the engine's ``participant``, so shared rounds know who may still join)."""
    with scope() if scope is not None else contextlib.nullcontext():
        return _answers(method, requests)


def _answers(method: SearchMethod, requests: Sequence[SearchRequest]) -> list[Outcome]:
    try:
        return list(method.search_batch(list(requests)))
    except Exception as exc:
        if len(requests) == 1:
            return [exc]
    outcomes: list[Outcome] = []
    for request in requests:
        try:
            outcomes.append(method.search_batch([request])[0])
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


class SearchBatcher:
    """Coalesces concurrent searches per method object; ``on_batch(method_name, size)`` sees every batch.

    ``concurrency``: batches of one method that may run at once (a search may ask for another number).
    """

    def __init__(self, *, window_s: float, max_batch: int, concurrency: int,
                 on_batch: Callable[[str, int], None] | None = None) -> None:
        self.window_s = window_s
        self.max_batch = max_batch
        self.concurrency = concurrency
        self.on_batch = on_batch
        self._queues: dict[int, _Queue] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._executor = ThreadPoolExecutor(max_workers=concurrency * 2 + 4, thread_name_prefix="a2x-search")

    async def search(self, method: SearchMethod, request: SearchRequest, timeout_s: float,
                     concurrency: int | None = None,
                     scope: Callable[[], AbstractContextManager[object]] | None = None) -> SearchAnswer:
        """The answer to one request (raises the request's own error, or TimedOut after ``timeout_s``).
        ``concurrency`` and ``scope`` apply to the method's batches (given by its first request)."""
        loop = asyncio.get_running_loop()
        queue = self._queues.get(id(method))
        if queue is None:
            slots = asyncio.Semaphore(concurrency or self.concurrency)
            queue = self._queues[id(method)] = _Queue(method, slots, scope)
        waiting = _Waiting(request, loop.create_future())
        queue.pending.append(waiting)
        if len(queue.pending) >= self.max_batch:
            queue.full.set()
        if queue.flusher is None:
            queue.flusher = self._spawn(self._flush(queue))
        try:
            outcome = await asyncio.wait_for(asyncio.shield(waiting.future), timeout_s)
        except TimeoutError:
            if waiting in queue.pending:  # never started: it costs the engine nothing
                queue.pending.remove(waiting)
            waiting.future.cancel()
            raise TimedOut(f"the search did not finish within {timeout_s:g} s",
                           hint="the server is busy or the model is slow; try again, or raise [serve] "
                                "request_timeout_s", code="Timeout") from None
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _spawn(self, coroutine: object) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coroutine)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _flush(self, queue: _Queue) -> None:
        """Form batches while requests wait: after the window (or as soon as a batch is full), when a slot is free."""
        try:
            while queue.pending:
                if len(queue.pending) < self.max_batch and self.window_s > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(queue.full.wait(), self.window_s)
                await queue.slots.acquire()
                batch = queue.pending[: self.max_batch]
                del queue.pending[: self.max_batch]
                if len(queue.pending) < self.max_batch:
                    queue.full.clear()
                if not batch:
                    queue.slots.release()
                    continue
                queue.running += 1
                self._spawn(self._run(queue, batch))
        finally:
            queue.flusher = None
            self._forget_if_idle(queue)

    async def _run(self, queue: _Queue, batch: list[_Waiting]) -> None:
        try:
            if self.on_batch is not None:
                self.on_batch(queue.method.name, len(batch))
            loop = asyncio.get_running_loop()
            try:
                outcomes = await loop.run_in_executor(self._executor, run_isolated, queue.method,
                                                      [waiting.request for waiting in batch], queue.scope)
            except Exception as exc:  # the executor itself failed: every request of the batch hears why
                outcomes = [exc] * len(batch)
            for waiting, outcome in zip(batch, outcomes, strict=True):
                if not waiting.future.done():
                    waiting.future.set_result(outcome)
        finally:
            queue.running -= 1
            queue.slots.release()
            self._forget_if_idle(queue)

    def _forget_if_idle(self, queue: _Queue) -> None:
        """Drop an idle queue, so methods replaced by a reload are not kept alive by it."""
        idle = not queue.pending and not queue.running and queue.flusher is None
        if idle and self._queues.get(id(queue.method)) is queue:
            del self._queues[id(queue.method)]

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)
