"""What the gateway's tests share: the small MCP servers of `a2x_local.testing.mcp_servers` as gateway file
entries (each with a unique name, so its processes can be found), tool services, and a look at live processes."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from a2x_local.registry import Service
from tests.support.processes import tree_env
from tests.support.servers import bound_port

ROOT = Path(__file__).resolve().parents[2]


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:10]}"


def stdio_server(name: str, *flags: str, start_timeout_s: float = 90, call_timeout_s: float = 60) -> str:
    """A gateway-file table starting the test server ``name`` over stdio with ``flags`` (a busy machine takes
    seconds to import the SDK: the start may take long)."""
    args = ", ".join(f'"{arg}"' for arg in ["-m", "a2x_local.testing.mcp_servers", "--name", name, *flags])
    return (f'[servers."{name}"]\ncommand = "{sys.executable}"\nargs = [{args}]\nenv = ["PYTHONPATH"]\n'
            f'cwd = "{ROOT}"\nstart_timeout_s = {start_timeout_s}\ncall_timeout_s = {call_timeout_s}\n')


def tool(server: str, name: str, schema: dict | None = None) -> Service:
    return Service(id=f"{server}/{name}", type="mcp_tool", name=name, description=f"{name} of {server}",
                   metadata={"server": server, "tool": name, "inputSchema": schema or {"type": "object"}})


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker`` (zombies aside)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z" and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def wait_until_gone(marker: str, timeout_s: float = 15) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@contextmanager
def http_test_server(name: str, *flags: str, startup_s: float = 60) -> Iterator[str]:
    """The test server over streamable HTTP on a loopback port it binds itself (`--port 0`, read back from its
    log); yields its /mcp URL, stops it after."""
    with tempfile.NamedTemporaryFile("w", prefix="mcp-server-", suffix=".log", delete=False) as log:
        process = subprocess.Popen([sys.executable, "-m", "a2x_local.testing.mcp_servers", "--name", name, "--port",
                                    "0", *flags], env=tree_env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
    log_path = Path(log.name)
    try:
        port = bound_port(process, log_path, startup_s)
        deadline = time.monotonic() + startup_s
        while True:
            assert process.poll() is None, f"the HTTP test server exited with {process.returncode}"
            try:
                httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the HTTP test server did not listen in time"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=20)
        log_path.unlink(missing_ok=True)
