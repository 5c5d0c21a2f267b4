"""MCP over this process's stdin and stdout: the SDK's stdio transport, with every line it cannot take answered.

The SDK's `stdio_server` passes a line it cannot parse into its read stream as an exception, which the server logs
at debug level and drops: the client of a request gets no answer and waits forever. That is what a lone surrogate
(``"\\ud800"``, valid JSON but not Unicode, refused by the SDK's parser) or a line of garbage did. JSON-RPC 2.0 asks
for an answer: a parse error (-32700, id null) for text that is not JSON, and an invalid request (-32600, with the
request's id when it has one) for JSON that is not a valid message. So each line is checked here first; lines the
SDK would refuse are answered here and never reach it, the rest go to it unchanged. Answers of both kinds are written
through one writer, a whole line at a time.

As the SDK does, descriptor 1 points at stderr while serving (stray output of libraries must never reach the
protocol channel) and descriptor 0 at the null device; the protocol runs on duplicates of the originals.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from io import TextIOWrapper
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, jsonrpc_message_adapter

from a2x_local.text import SURROGATE, printable

log = logging.getLogger("a2x_local.serve")


class _LineWriter:
    """The protocol's stdout: each write is one whole line, written and flushed under a lock, so the SDK's answers and
    ours never interleave; text that cannot be encoded is escaped rather than lost."""

    def __init__(self, wire: int) -> None:
        self._file = anyio.wrap_file(TextIOWrapper(os.fdopen(wire, "wb", closefd=False), encoding="utf-8",
                                                   errors="backslashreplace", write_through=True))
        self._lock = anyio.Lock()

    async def write(self, text: str) -> None:
        async with self._lock:
            await self._file.write(text)
            await self._file.flush()

    async def flush(self) -> None:
        """Each write flushes already."""


def refusal(line: str) -> dict[str, Any] | None:
    """The JSON-RPC error for a line the SDK would drop unanswered, None for a line it takes; a notification that
    cannot be taken gets no answer (JSON-RPC never answers notifications), only a log line."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as exc:   # ValueError: not JSON, or an integer past Python's digit limit
        return _error(None, PARSE_ERROR, f"Parse error: not JSON ({exc.__class__.__name__}: {printable(str(exc))})")
    try:
        jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        request_id = message.get("id") if isinstance(message, dict) else None
        if isinstance(message, dict) and "method" in message and request_id is None:
            log.warning("MCP stdio: dropped a notification that is not a valid message")
            return {}
        where = _surrogate_at(message)
        request_id = request_id if isinstance(request_id, str | int) else None
        if where and where.startswith("params"):
            return _error(request_id, INVALID_PARAMS,
                          f"Invalid params: {where}: contains an unpaired surrogate (not valid Unicode)")
        why = (f"{where}: contains an unpaired surrogate (not valid Unicode)" if where else
               f"not a valid JSON-RPC message ({printable(str(exc).splitlines()[0])})")
        return _error(request_id, INVALID_REQUEST, f"Invalid request: {why}")
    return None


def _error(request_id: str | int | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message[:500]}}


def _surrogate_at(value: Any, path: str = "") -> str | None:
    """Where in a parsed message text holds an unpaired surrogate ("params.arguments.query"), else None."""
    if isinstance(value, str):
        return (path or "$") if SURROGATE.search(value) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        step = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{printable(key)}" if path else printable(key)
        if isinstance(key, str) and SURROGATE.search(key):
            return step
        found = _surrogate_at(child, step)
        if found:
            return found
    return None


async def _lines(wire: int, out: _LineWriter) -> AsyncIterator[str]:
    """The lines the SDK may take; the others are answered here (blank lines are skipped)."""
    source = anyio.wrap_file(TextIOWrapper(os.fdopen(wire, "rb", closefd=False), encoding="utf-8",
                                           errors="surrogateescape"))
    async for line in source:
        if not line.strip():
            continue
        answer = refusal(line)
        if answer is None:
            yield line
        elif answer:
            await out.write(json.dumps(answer, ensure_ascii=True) + "\n")


@contextmanager
def _claimed_stdio() -> Iterator[tuple[int, int]]:
    """Duplicates of descriptors 0 and 1 for the protocol; meanwhile 0 reads the null device and 1 writes stderr."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        yield wire_in, wire_out
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


async def run_stdio(server: MCPServer) -> None:
    """Serve ``server`` over stdio until stdin closes (what `MCPServer.run_stdio_async` does, with the lines it
    would drop answered)."""
    lowlevel = server._lowlevel_server   # the SDK's own run_stdio_async does the same; it offers no public handle
    with _claimed_stdio() as (wire_in, wire_out):
        out = _LineWriter(wire_out)
        lines: Any = _lines(wire_in, out)      # the SDK iterates stdin and calls write/flush on stdout: duck types
        writer: Any = out
        async with stdio_server(stdin=lines, stdout=writer) as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
