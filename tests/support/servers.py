"""Servers the tests start as subprocesses (`a2x-local serve`, the MCP test server, vLLM's OpenAI server): where
they listen, and one way to wait until the server answers and to stop it afterwards.

No test picks a free port first and hands it over (bind, release, let the server bind it later: a race with every
other process on the machine). A server given `--port 0` binds a port the system picks and uvicorn logs it
("Uvicorn running on http://127.0.0.1:PORT"): `bound_port` reads it back. vLLM's server logs the port it was given,
not the one bound, so it listens on a Unix socket in the test's own folder instead (`--uds`), which no other process
can take. A port that must refuse connections is one this process holds without listening (`closed_port`)."""

from __future__ import annotations

import re
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

_BOUND = re.compile(r"Uvicorn running on https?://[^\s]+:(\d+)")


def bound_port(process: subprocess.Popen, log: Path, startup_s: float) -> int:
    """The port of a server started with `--port 0`, from uvicorn's start line in ``log`` (its stderr)."""
    deadline = time.monotonic() + startup_s
    while True:
        found = _BOUND.search(log.read_text(encoding="utf-8", errors="replace")) if log.is_file() else None
        if found:
            return int(found.group(1))
        if process.poll() is not None:
            pytest.fail(f"the server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"the server logged no port within {startup_s} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.05)


@contextmanager
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections for the block: bound here and never listened on, so no other
    process can take it meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@contextmanager
def serving(process: subprocess.Popen, health_url: str, log: Path, startup_s: float, poll_s: float = 0.3, *,
            transport: httpx.BaseTransport | None = None) -> Iterator[None]:
    """Wait until `health_url` answers 200, then hold the server for the block; on leaving, stop it.

    ``transport``: how to reach the server when not by TCP (`httpx.HTTPTransport(uds=PATH)` for a Unix socket).
    Fails at once when the process exits first, and after `startup_s`; both failures show the end of `log`, the
    file the server's output goes to."""
    try:
        deadline = time.monotonic() + startup_s
        with httpx.Client(transport=transport, timeout=2) as client:
            while True:
                if process.poll() is not None:
                    pytest.fail(f"the server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
                try:
                    if client.get(health_url).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"the server did not answer {health_url} within {startup_s} s:\n"
                                f"{log.read_text()[-3000:]}")
                time.sleep(poll_s)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
