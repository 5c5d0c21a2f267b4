"""Sessions to MCP servers, pooled per server, run on one event loop (`GatewayLoop`: the server's own, or a loop
on a thread of its own).

Every session is the official SDK's `Client` over stdio (the server started as a process on first use, in its own
process group, with only the environment the gateway file allows) or over streamable HTTP. A session carries up to
`max_calls_per_session` calls at once; a server gets at most `max_sessions` of them; a call finding every one busy
waits for a free one within its time limit. A session unused for `idle_stop_s` is closed (its process stopped, the
SDK killing the whole process group after a grace period), and so is one whose server stopped answering, died, or
left a call unanswered past its time limit. So a failing server costs its own callers an error naming it, never
anyone else a wait, and no process outlives its session.

The SDK's client runs on anyio task groups that must be entered and left by one task: each session is owned by a
task on the gateway loop that opens the client, waits until the session is to close, and closes it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from pydantic import ValidationError

from a2x_local import __version__
from a2x_local.gateway.connections import HttpTarget, ServerEntry, StdioTarget, child_environment, read_secret
from a2x_local.gateway.errors import GatewayError

log = logging.getLogger("a2x_local.gateway")
# The SDK logs a traceback for every line a server prints on stdout that is not JSON-RPC; the gateway counts those
# lines and names them in the caller's error instead.
logging.getLogger("mcp.client.stdio").setLevel(logging.CRITICAL)
T = TypeVar("T")
STDERR_TAIL_BYTES = 4096
REAP_EVERY_S = 1.0
CONNECTION_CLOSED = -32000
MIN_CALL_S = 0.01     # a session found with less of the deadline left than this is not worth sending a call to
Progress = Callable[[float, float | None, str | None], Awaitable[None]]


class GatewayLoop:
    """The event loop every session lives on, whichever loop a caller runs on. By default a loop on its own daemon
    thread (the CLI's `gateway check`, tests that call from `asyncio.run`); a server adopts its own loop instead
    (`adopt`), so a call is awaited where it came from: no hop to another thread and back, each of which cost the
    calling thread its turn at the GIL (1-2 ms a call through `serve`, measured). Callers await `run`, which carries
    cancellation across when the loops differ."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._owned = False
        self._lock = threading.Lock()

    def adopt(self, loop: asyncio.AbstractEventLoop | None = None) -> bool:
        """Make ``loop`` (default: the running one) the sessions' loop; False when another is in use already."""
        with self._lock:
            loop = loop or asyncio.get_running_loop()
            if self._loop is None:
                self._loop, self._owned = loop, False
            return self._loop is loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                threading.Thread(target=serve, name="a2x-gateway", daemon=True).start()
                ready.wait()
                self._loop, self._owned = loop, True
            return self._loop

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the gateway loop and await it here; cancelling the caller cancels it there."""
        loop = self.loop
        if loop is asyncio.get_running_loop():
            return await work
        future = asyncio.run_coroutine_threadsafe(work, loop)
        return await asyncio.wrap_future(future)

    def call(self, work: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``work`` on the gateway loop from a thread that has no loop (the CLI), and wait for it."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout_s)

    async def aclose(self, pools: list[ServerPool]) -> None:
        """Close every session of ``pools``, awaited on any loop (a server closing on the loop it adopted)."""
        loop = self._loop
        if loop is None:
            return
        if loop is not asyncio.get_running_loop():
            await asyncio.to_thread(self.close, pools)
            return
        await _close_pools(pools, everything=False)
        with self._lock:
            self._loop = None

    def close(self, pools: list[ServerPool]) -> None:
        """Close every session of ``pools`` (their processes stopped) and stop the loop if it is the gateway's own;
        from another thread than the loop's (an adopted loop that no longer runs had its tasks ended with it)."""
        with self._lock:
            loop, owned, self._loop = self._loop, self._owned, None
        if loop is None or loop.is_closed() or not (owned or loop.is_running()):
            return
        try:
            asyncio.run_coroutine_threadsafe(_close_pools(pools, everything=owned), loop).result(30)
        except Exception as exc:   # shutting down: say what was left, do not hide the server's own exit
            log.warning("closing the gateway's sessions failed: %s", exc)
        if owned:
            loop.call_soon_threadsafe(loop.stop)


async def _close_pools(pools: list[ServerPool], *, everything: bool) -> None:
    """Close the pools and end their reapers; on the gateway's own loop, every other task too (nothing else runs
    there)."""
    await asyncio.gather(*(pool.close() for pool in pools), return_exceptions=True)
    others = [pool.reaper for pool in pools if pool.reaper is not None and not pool.reaper.done()]
    if everything:
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


class StderrTail:
    """A stdio server's stderr: read on a thread, the last few kilobytes kept for error messages; ``ended`` once
    every holder of the pipe (the server and its children) has closed it, i.e. the process has exited."""

    def __init__(self) -> None:
        read, write = os.pipe()
        self.file = os.fdopen(write, "w", encoding="utf-8", errors="replace")
        self._read = read
        self._data = bytearray()
        self.ended = threading.Event()
        threading.Thread(target=self._drain, name="a2x-gateway-stderr", daemon=True).start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self._read, 65536):
                self._data += chunk
                del self._data[:-STDERR_TAIL_BYTES]
        finally:
            os.close(self._read)
            self.ended.set()

    def release(self) -> None:
        """Close this process's copy of the write end (the server holds its own)."""
        if not self.file.closed:
            self.file.close()

    def text(self) -> str:
        lines = bytes(self._data).decode("utf-8", "replace").strip().splitlines()
        return " | ".join(line.strip() for line in lines[-3:])[-400:]


def _innermost(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


class Session:
    """One client session to a server (see the module docstring); ``number`` tells a server's sessions apart."""

    def __init__(self, entry: ServerEntry, number: int, start_timeout_s: float, *, verbose: bool = False) -> None:
        self.entry = entry
        self.verbose = verbose
        self.number = number
        self.start_timeout_s = start_timeout_s
        self.inflight = 0
        self.calls = 0
        self.last_used = time.monotonic()
        self.retiring = False
        self.client: Any = None
        self.garbage = 0
        self.first_garbage = ""
        self.stderr: StderrTail | None = None
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # A start that failed after its caller gave up is still looked at (no "exception never retrieved").
        self._ready.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._stop = asyncio.Event()
        self.closed = asyncio.Event()
        self._task = asyncio.ensure_future(self._own())

    @property
    def server(self) -> str:
        return self.entry.name

    @property
    def ready(self) -> bool:
        return self._ready.done() and self._ready.exception() is None and self.client is not None

    @property
    def usable(self) -> bool:
        """Takes new calls: not retiring, not failed, and (stdio) its process has not exited."""
        if self.retiring or self.closed.is_set() or (self._ready.done() and self._ready.exception() is not None):
            return False
        return not (self.stderr is not None and self.stderr.ended.is_set())

    def _transport(self) -> Any:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        target = self.entry.target
        if isinstance(target, StdioTarget):
            self.stderr = StderrTail()
            params = StdioServerParameters(command=target.command, args=list(target.args),
                                           env=child_environment(target), cwd=target.cwd)
            return stdio_client(params, errlog=self.stderr.file)
        assert isinstance(target, HttpTarget)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = {name: read_secret(secret, f"server '{self.server}': header {name}")
                   for name, secret in target.headers}
        self._http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=None))
        return streamable_http_client(target.url, http_client=self._http)

    async def _own(self) -> None:
        """Open the client, keep it until the session is to close, close it (the process stopped)."""
        from mcp import Client
        from mcp.types import Implementation

        try:
            client = Client(self._transport(), mode="legacy", cache=None, message_handler=self._on_message,
                            client_info=Implementation(name="a2x-local-gateway", version=__version__))
            async with client:
                if self.stderr is not None:
                    self.stderr.release()
                self.client = client
                self._ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:  # every way out is the session's end; the caller hears it through _ready
            if not self._ready.done():
                stopped = GatewayError("closed while starting", code="ServerFailed")  # no hint: never shown
                self._ready.set_exception(_innermost(exc) if isinstance(exc, Exception) else stopped)
            if not isinstance(exc, Exception):
                raise
        finally:
            self.client = None
            if self.stderr is not None:
                self.stderr.release()
            http = getattr(self, "_http", None)
            if http is not None:
                await http.aclose()
            self.closed.set()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):   # a line on stdout that is not a JSON-RPC message
            self.garbage += 1
            if not self.first_garbage:   # the line itself, as the parser's error quotes it
                found = re.search(r"input_value=(.{0,120}?), input_type", str(message))
                self.first_garbage = found.group(1) if found else type(message).__name__

    def where(self) -> str:
        """What a message about this session adds: how it was started, lines printed on stdout, the end of
        stderr."""
        parts = [f"started as: {self.entry.target.describe()}"]
        if self.garbage:
            parts.append(f"it printed {self.garbage} line(s) on stdout that are not JSON-RPC ({self.first_garbage})")
        tail = self.stderr.text() if self.stderr is not None else ""
        if tail:
            parts.append(f"its stderr ends: {tail}")
        return "; ".join(parts)

    def _failure(self, what: str, *, code: str = "ServerFailed", status: int = 502, outcome: str = "failed",
                 hint: str | None = None) -> GatewayError:
        """The caller's error. Its command line, stderr and stray output may hold what a client must not read
        (paths, a server's own secrets), so a client hears only what happened and how many stray lines there were;
        the gateway's log (and the owner's `gateway check`, with ``verbose``) has the rest."""
        detail = self.where()
        message = f"server '{self.server}': {what}"
        if self.verbose:
            message += f"; {detail}"
        else:
            log.warning("%s; %s", message, detail)
            if self.garbage:
                message += f"; it printed {self.garbage} line(s) on stdout that are not JSON-RPC"
            message += " (the gateway's log has its stderr)" if self.stderr is not None else ""
        return GatewayError(message, code=code, status=status, outcome=outcome,
                            hint=hint or "`a2x-local gateway check --server NAME` shows whether it starts and "
                                         "answers, with what it printed")

    async def wait_ready(self) -> None:
        """Until the handshake is done; a server that fails or takes too long is stopped and reported."""
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self.start_timeout_s)
        except TimeoutError:
            self.close()
            await self.closed.wait()
            raise self._failure(f"did not answer the MCP handshake within {self.start_timeout_s:g} s",
                                code="ServerTimeout", status=504, outcome="timeout") from None
        except GatewayError:
            raise
        except Exception as exc:
            await self.closed.wait()
            if self.stderr is not None:      # its last words (an import error, a usage line) make the message
                await asyncio.to_thread(self.stderr.ended.wait, 1.0)
            raise self._failure(f"did not start: {type(exc).__name__}: {str(exc)[:300]}") from exc

    async def call(self, tool: str, arguments: dict[str, Any], timeout_s: float, progress: Progress | None, *,
                   waited_s: float = 0.0) -> Any:
        """The server's answer to one tools/call within what is left of ``timeout_s`` after ``waited_s`` spent
        waiting for this session; failures become errors naming the server."""
        from mcp.shared.exceptions import MCPError

        self.calls += 1
        waited = f" ({waited_s:.1f} s of it waiting for a free session)" if waited_s >= 0.05 else ""
        try:
            return await asyncio.wait_for(self.client.call_tool(tool, arguments, progress_callback=progress),
                                          max(timeout_s - waited_s, 0.001))
        except TimeoutError:
            self.retiring = True    # a server that left a call unanswered may be stuck: no new calls here
            raise self._failure(f"tool '{tool}' did not answer within {timeout_s:g} s{waited} (the call was "
                                "cancelled)",
                                code="ServerTimeout", status=504, outcome="timeout",
                                hint="try again later; [gateway] call_timeout_s (or the server's call_timeout_s "
                                     "in the gateway file) sets the limit") from None
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                self.retiring = True
                raise self._failure(f"the connection closed during a call of tool '{tool}' (the server exited or "
                                    "dropped it)") from None
            raise self._failure(f"refused the call of tool '{tool}': {exc.error.message[:300]} (JSON-RPC error "
                                f"{exc.error.code})", code="ToolCallFailed",
                                hint="check the arguments against the tool's inputSchema (get_service)") from None
        except ValidationError as exc:
            raise self._failure(f"answered the call of tool '{tool}' with something that is not a tool result "
                                f"({exc.error_count()} problems)") from None
        except Exception as exc:   # whatever the transport raised: the session is done
            # The transport broke (an HTTP server gone, a pipe closed): the caller is told, the session retired.
            self.retiring = True
            raise self._failure(f"the connection failed during a call of tool '{tool}': "
                                f"{type(exc).__name__}: {str(exc)[:200]}") from exc
        finally:
            self.last_used = time.monotonic()

    def close(self) -> None:
        self.retiring = True
        self._stop.set()
        if not self._ready.done():
            self._task.cancel()


class ServerPool:
    """The sessions of one server (see the module docstring)."""

    def __init__(self, entry: ServerEntry, *, max_sessions: int, max_calls: int, start_timeout_s: float,
                 idle_stop_s: float) -> None:
        self.entry = entry
        self.max_sessions = max_sessions
        self.max_calls = max_calls
        self.start_timeout_s = start_timeout_s
        self.idle_stop_s = idle_stop_s
        self.sessions: list[Session] = []
        self.started = 0
        self._freed = asyncio.Condition()
        self.reaper: asyncio.Task[None] | None = None
        self.closed = False

    @property
    def name(self) -> str:
        return self.entry.name

    def _pick(self) -> Session | None:
        """A session with room for one more call (the least busy), else a new one while under the limit."""
        open_ones = [s for s in self.sessions if s.usable and s.inflight < self.max_calls]
        if open_ones:
            return min(open_ones, key=lambda s: (s.inflight, s.number))
        if len([s for s in self.sessions if not s.closed.is_set()]) < self.max_sessions:
            self.started += 1
            session = Session(self.entry, self.started, self.start_timeout_s)
            self.sessions.append(session)
            self._ensure_reaper()
            return session
        return None

    async def call(self, tool: str, arguments: dict[str, Any], *, timeout_s: float,
                   progress: Progress | None = None) -> Any:
        """One call on a free session within ``timeout_s`` all told: the wait for a free session and the call share
        one deadline (a server's cold start has its own limit, `start_timeout_s`, and does not count)."""
        if self.closed:
            raise GatewayError(f"server '{self.name}': the gateway is closing", code="Unavailable", status=503,
                               outcome="failed", hint="try again once the server is back")
        deadline = time.monotonic() + timeout_s
        session = None
        async with self._freed:
            while session is None:
                left = deadline - time.monotonic()
                session = self._pick() if left >= MIN_CALL_S else None
                if session is None:
                    try:
                        if left < MIN_CALL_S:
                            raise TimeoutError
                        await asyncio.wait_for(self._freed.wait(), left)
                    except TimeoutError:
                        raise GatewayError(
                            f"server '{self.name}': all {self.max_sessions} sessions were busy ({self.max_calls} "
                            f"calls each) for {timeout_s:g} s", code="Busy", status=503, outcome="busy",
                            hint="try again; the gateway file's max_sessions ([gateway] max_sessions_per_server) "
                                 "allows more sessions") from None
            session.inflight += 1
        waited = timeout_s - (deadline - time.monotonic())
        try:
            await session.wait_ready()     # a cold start has its own limit (start_timeout_s), not the call's
            return await session.call(tool, arguments, timeout_s, progress, waited_s=waited)
        finally:
            session.inflight -= 1
            session.last_used = time.monotonic()
            if session.retiring and session.inflight == 0:
                session.close()
            async with self._freed:
                self._freed.notify_all()

    def _ensure_reaper(self) -> None:
        if self.reaper is None or self.reaper.done():
            self.reaper = asyncio.ensure_future(self._reap())

    async def _reap(self) -> None:
        """Close idle, retiring and dead sessions; forget closed ones; end when none is left."""
        while self.sessions:
            await asyncio.sleep(REAP_EVERY_S)
            now = time.monotonic()
            for session in self.sessions:
                idle = session.inflight == 0 and now - session.last_used > self.idle_stop_s
                if session.inflight == 0 and (idle or session.retiring or not session.usable):
                    session.close()
            self.sessions = [s for s in self.sessions if not s.closed.is_set()]

    def retire(self) -> None:
        """No new calls; each session closes once its calls in flight are done (a server whose connection
        changed in the gateway file)."""
        self.closed = True
        for session in self.sessions:
            session.retiring = True
        self._ensure_reaper()

    def live(self) -> int:
        return len([s for s in self.sessions if not s.closed.is_set()])

    async def close(self) -> None:
        self.closed = True
        for session in self.sessions:
            session.close()
        for session in self.sessions:
            await session.closed.wait()
        self.sessions = []
