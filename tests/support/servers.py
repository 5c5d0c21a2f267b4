"""Servers the tests start as subprocesses (`a2x-local serve`, the MCP test server, vLLM's OpenAI server): the port
they bound, and one way to wait until the server answers and to stop it afterwards.

A server given `--port 0` binds a port the system picks and uvicorn logs it ("Uvicorn running on
http://127.0.0.1:PORT"): `bound_port` reads it back. Picking a free port first (`free_port`: bind, release, and
let the server bind it later) races with every other process on the machine, so it is kept for what cannot be
asked for port 0 (vLLM's server) and for a port that must stay closed."""

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


def free_port() -> int:
    """A port free a moment ago (see the module's note: racy; prefer `--port 0` and `bound_port`)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serving(process: subprocess.Popen, health_url: str, log: Path, startup_s: float,
            poll_s: float = 0.3) -> Iterator[None]:
    """Wait until `health_url` answers 200, then hold the server for the block; on leaving, stop it.

    Fails at once when the process exits first, and after `startup_s`; both failures show the end of `log`, the
    file the server's output goes to."""
    try:
        deadline = time.monotonic() + startup_s
        while True:
            if process.poll() is not None:
                pytest.fail(f"the server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(health_url, timeout=2).status_code == 200:
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
