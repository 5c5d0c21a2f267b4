"""One engine shared by every request in flight: engine calls of concurrent searches become shared rounds.

A search runs its engine rounds one after another (one per tree level, then selection), and each round is one
``engine.generate`` call. When several searches run at once (on worker threads), their calls arrive here; calls
that arrive within a short window are sent to the engine as ONE call, so a request at the top of the tree and one
at its leaves share a round, and throughput grows with the number of clients instead of queueing behind one
another. Only this class's thread ever calls the engine, which vLLM's offline engine needs (it is not
thread-safe). When a merged call raises, each caller's part is sent again on its own, so a failure reaches only
the request it belongs to.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from a2x_local.llm import Engine, Message, Request, Result

log = logging.getLogger("a2x_local.serve")


@dataclass
class _Call:
    """One caller's generate(): its requests, and the answer or error it gets back."""

    requests: list[Request]
    arrived: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)
    results: list[Result] | None = None
    error: BaseException | None = None


class SharedRounds(Engine):
    """An engine that merges concurrent ``generate`` calls into shared rounds of the engine it wraps.

    ``on_round(prompts)`` is told the size of every merged call (the server's batch-size metric). ``usage`` is the
    inner engine's, so tokens are counted once.

    Searches that run on the engine say so with ``participant()``. A round then closes as soon as every participant
    is waiting for it (nobody else could join: a lone search never waits for the window), and otherwise when the
    window since its first call ends or the round is full.
    """

    name = "shared-rounds"

    def __init__(self, inner: Engine, *, window_s: float, max_prompts: int,
                 on_round: Callable[[int], None] | None = None) -> None:
        super().__init__()
        self.inner = inner
        self.usage = inner.usage
        self.window_s = window_s
        self.max_prompts = max_prompts
        self.on_round = on_round
        self._pending: list[_Call] = []
        self._wake = threading.Condition()
        self._closed = False
        self._participants = 0
        self._round_ended = 0.0
        self._tokenizer_lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="a2x-engine-rounds", daemon=True)
        self._thread.start()

    @property
    def max_model_len(self) -> int | None:
        return self.inner.max_model_len

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        # Searches count on their own threads; one tokenizer is not safe to share between threads.
        with self._tokenizer_lock:
            return self.inner.count_prompt_tokens(messages)

    def _generate(self, requests: Sequence[Request]) -> list[Any]:
        raise NotImplementedError("SharedRounds answers through generate()")

    def generate(self, requests: Sequence[Request]) -> list[Result]:
        """Wait for this call's share of the next round; retries and validation happen in the inner engine."""
        call = _Call(list(requests))
        if not call.requests:
            return []
        with self._wake:
            if self._closed:
                raise RuntimeError("the engine has been closed")
            self._pending.append(call)
            self._wake.notify()
        call.done.wait()
        if call.error is not None:
            raise call.error
        assert call.results is not None
        return call.results

    @contextmanager
    def participant(self) -> Iterator[None]:
        """Mark the calling thread as a search that will call ``generate`` (one call at a time) until the block ends."""
        with self._wake:
            self._participants += 1
        try:
            yield
        finally:
            with self._wake:
                self._participants -= 1
                self._wake.notify()

    def _everyone_waits(self) -> bool:
        return 0 < self._participants <= len(self._pending)

    def _take(self) -> list[_Call] | None:
        """The calls of the next round: wait for a first call, then for more until the window closes, the round is
        full or every participant waits; a call is never split between rounds.

        The window opens at the first call or at the end of the previous round, whichever is later: the searches of
        the round that just ended need a moment to come back with their next call, and a round that started without
        them would split the searches in flight into two groups taking turns, each round half full.
        """
        with self._wake:
            while not self._pending and not self._closed:
                self._wake.wait()
            if self._closed:
                return None
            deadline = max(self._pending[0].arrived, self._round_ended) + self.window_s
            while sum(len(c.requests) for c in self._pending) < self.max_prompts and not self._everyone_waits():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._wake.wait(left)
            taken, size = [], 0
            while self._pending and (not taken or size + len(self._pending[0].requests) <= self.max_prompts):
                call = self._pending.pop(0)
                taken.append(call)
                size += len(call.requests)
            return taken

    def _loop(self) -> None:
        while (calls := self._take()) is not None:
            self._run(calls)
            self._round_ended = time.monotonic()

    def _run(self, calls: list[_Call]) -> None:
        merged = [request for call in calls for request in call.requests]
        if self.on_round is not None:
            self.on_round(len(merged))
        try:
            results = self.inner.generate(merged)
        except BaseException as exc:  # handed to the callers, never swallowed
            if len(calls) == 1:
                self._finish(calls[0], error=exc)
                return
            log.warning("a shared engine round of %d calls failed (%s); retrying each call alone", len(calls), exc)
            for call in calls:
                self._run([call])
            return
        start = 0
        for call in calls:
            self._finish(call, results=results[start:start + len(call.requests)])
            start += len(call.requests)

    @staticmethod
    def _finish(call: _Call, *, results: list[Result] | None = None, error: BaseException | None = None) -> None:
        call.results, call.error = results, error
        call.done.set()

    def close(self) -> None:
        """Stop the round thread (calls still waiting get an error) and close the inner engine."""
        with self._wake:
            self._closed = True
            waiting, self._pending = self._pending, []
            self._wake.notify_all()
        for call in waiting:
            self._finish(call, error=RuntimeError("the server is shutting down"))
        self._thread.join(timeout=30)
        self.inner.close()
