"""Servers the tests start as subprocesses (`a2x-local serve`, vLLM's OpenAI server): a free port, and one way to
wait until the server answers and to stop it afterwards."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest


def free_port() -> int:
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
