"""Benchmark: calls through the gateway; prints JSON (last line).

Servers: the test MCP server of `a2x_local.testing.mcp_servers` (the SDK's MCPServer), over stdio (started by
the gateway) and over streamable HTTP on 127.0.0.1, each with a tool that answers at once (`echo`) and one that
takes 50 ms (`work`). Measured:

- added latency: `echo` called N times one after another through the gateway, minus the same calls made directly
  with the SDK client on a warm session to the same server (stdio: a second process of it; HTTP: the same URL).
  Three ways through the gateway: the top-level `latency_*` (the `Gateway` itself, on the caller's loop as `serve`
  runs it: policy, schema check, pool, the audit row), and unless --no-serve, `via_serve` (an SDK client calling
  `call_service` on `a2x-local serve`'s /mcp: an agent's whole path over HTTP, one more HTTP round trip and MCP
  decoding included) and `via_serve_stdio` (the SDK client on a warm `a2x-local serve --stdio` session);
- throughput: calls of `work` (50 ms) per second with 1 and 16 concurrent clients, through the `Gateway` and
  through `serve`'s /mcp (16 agents, each its own SDK client), after 16 concurrent calls that start the sessions
  they need (warm sessions, as for the latency);
- the server processes alive before, during and after (the gateway closes every session), and errors.

The machine's load average is printed with the result: on a shared machine the wall clock moves with it.

Targets (issue 34): 0 errors, p50 added latency <= 5 ms over HTTP and <= 10 ms over a warm stdio session,
calls/s at 16 clients >= 4x those at 1 client.

Usage: .venv/bin/python scripts/bench_gateway.py [--calls 200] [--seconds 10] [--no-serve]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import httpx2
from bench_serve import free_port, stop  # scripts/ is on the path when a script runs
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from a2x_local.db import connect
from a2x_local.gateway import AuditLog, Caller, Gateway, GatewayConfig, check_servers, load_gateway_file
from a2x_local.gateway.policy import Profile
from a2x_local.registry import Limits, Registry

ROOT = Path(__file__).resolve().parents[1]
SERVER = [sys.executable, "-m", "a2x_local.testing.mcp_servers"]
CALLER = Caller(Profile("bench", call=("*",)), "bench")
WARM_UP = 16     # concurrent calls before a throughput run: every session its clients need is started


def processes_with(marker: str) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes() and int(entry.name) != os.getpid():
                    count += 1
            except OSError:
                continue
    return count


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 3),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 3)}


async def paired(calls: int, direct, through) -> dict:
    """The same call made directly and through the gateway, alternately (so both see the same load on a shared
    machine), after one warm-up each; the added latency is the median of the paired differences."""
    await direct()
    await through()
    straight, gated = [], []
    for _ in range(calls):
        for one, samples in ((direct, straight), (through, gated)):
            started = time.perf_counter()
            await one()
            samples.append(time.perf_counter() - started)
    added = [g - s for g, s in zip(gated, straight, strict=True)]
    return {"direct": percentiles(straight), "gateway": percentiles(gated),
            "added_p50_ms": round(statistics.median(added) * 1000, 3),
            "added_p99_ms": round(sorted(added)[min(len(added) - 1, int(len(added) * 0.99))] * 1000, 3)}


async def throughput(clients: int, seconds: float, one, each=None) -> dict[str, float]:
    """Calls per second from ``clients`` concurrent loops of ``one()`` (or ``each(i)``: client i's own call)."""
    done = errors = 0
    deadline = time.monotonic() + seconds

    async def client(number: int) -> None:
        nonlocal done, errors
        while time.monotonic() < deadline:
            try:
                await (each(number) if each is not None else one())
                done += 1
            except Exception:   # counted: the benchmark reports errors, it does not stop on them
                errors += 1

    started = time.monotonic()
    await asyncio.gather(*(client(number) for number in range(clients)))
    return {"clients": clients, "calls": done, "errors": errors,
            "calls_per_s": round(done / (time.monotonic() - started), 1)}


def echo_of(client: Client):
    return lambda: client.call_tool("echo", {"text": "x"})


def direct_stdio(name: str) -> Client:
    return Client(StdioServerParameters(command=SERVER[0], args=[*SERVER[1:], "--name", name], cwd=str(ROOT),
                                        env={"PYTHONPATH": str(ROOT)}), mode="legacy")


def direct_http(url: str) -> tuple[httpx2.AsyncClient, Client]:
    http = httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=120))
    return http, Client(streamable_http_client(url, http_client=http), mode="legacy")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200, help="sequential calls per latency measurement")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each throughput run")
    parser.add_argument("--no-serve", action="store_true", help="skip the measurement through `a2x-local serve`")
    args = parser.parse_args()
    marker = f"bench-{uuid.uuid4().hex[:8]}"
    stdio_name, http_name = f"{marker}-stdio", f"{marker}-http"
    port = free_port()
    http_server = subprocess.Popen([*SERVER, "--name", http_name, "--port", str(port)], cwd=ROOT,
                                   env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    result: dict = {"load_before": os.getloadavg(), "calls": args.calls, "seconds": args.seconds}
    with tempfile.TemporaryDirectory(prefix="a2x-bench-gateway-") as folder_name:
        folder = Path(folder_name)
        try:
            for _ in range(300):
                try:
                    httpx.get(url, timeout=1)
                    break
                except httpx.TransportError:
                    time.sleep(0.2)
            gateway_file = folder / "gateway.toml"
            args_text = ", ".join(f'"{a}"' for a in [*SERVER[1:], "--name", stdio_name])
            gateway_file.write_text(
                f'[servers."{stdio_name}"]\ncommand = "{SERVER[0]}"\nargs = [{args_text}]\nenv = ["PYTHONPATH"]\n'
                f'cwd = "{ROOT}"\n[servers."{http_name}"]\nurl = "{url}"\n'
                '[profiles.bench]\ntokens = [{ env = "BENCH_TOKEN" }]\ncall = ["*"]\n', encoding="utf-8")
            os.environ["BENCH_TOKEN"] = "bench-token"
            os.environ["PYTHONPATH"] = str(ROOT)
            db = folder / "registry.duckdb"
            config = GatewayConfig.defaults()
            with connect(db):
                pass

            def open_db():
                return connect(db)

            checked = list(check_servers(load_gateway_file(gateway_file), config, open_db, folder / "tools",
                                         Limits.defaults()))
            assert all(c.ok for c in checked), [c.error for c in checked]
            with connect(db, mode="read") as con:
                services = {s.id: s for s in Registry(con).list(service_type="mcp_tool")}
            result["processes_before"] = processes_with(marker) - 1     # the HTTP server is not the gateway's
            gateway = Gateway(config, gateway_file, audit=AuditLog(db, config))
            result.update(asyncio.run(measure(gateway, services, stdio_name, http_name, url, args)))
            gateway.close()
            time.sleep(0.5)
            result["processes_after_close"] = processes_with(marker) - 1
            if not args.no_serve:
                result["via_serve"] = via_serve(folder, db, gateway_file, stdio_name, http_name, url, args)
                result["via_serve_stdio"] = via_serve_stdio(folder, db, gateway_file, stdio_name, http_name, url,
                                                            args)
                result["processes_after_serve"] = processes_with(marker) - 1
            with connect(db, mode="read") as con:
                result["audit_rows"] = con.execute("SELECT count(*) FROM gateway_calls").fetchone()[0]
        finally:
            stop(http_server)
    result["load_after"] = os.getloadavg()
    result["errors"] = sum(run.get("errors", 0) for where in (result, result.get("via_serve", {}))
                           for key in ("throughput_stdio", "throughput_http") for run in where.get(key, []))
    print(json.dumps(result))


async def measure(gateway: Gateway, services: dict, stdio_name: str, http_name: str, url: str,
                  args: argparse.Namespace) -> dict:
    gateway.loop.adopt()     # as `serve` runs it: the sessions on the caller's own loop
    try:
        return await _measure(gateway, services, stdio_name, http_name, url, args)
    finally:
        await gateway.aclose()


async def _measure(gateway: Gateway, services: dict, stdio_name: str, http_name: str, url: str,
                   args: argparse.Namespace) -> dict:
    found: dict = {}

    def through(server: str, tool: str, arguments: dict):
        service = services[f"{server}/{tool}"]

        async def one():
            answer = await gateway.call(CALLER, service.id, service, arguments, services=services, via="bench")
            assert not answer.is_error
            return answer

        return one

    # Added latency: the same echo, directly with the SDK (warm session) and through the gateway (warm session).
    async with direct_stdio(f"{stdio_name}-direct") as client:
        found["latency_stdio"] = await paired(args.calls, lambda: client.call_tool("echo", {"text": "x"}),
                                              through(stdio_name, "echo", {"text": "x"}))
    http, client = direct_http(url)
    async with http, client:
        found["latency_http"] = await paired(args.calls, lambda: client.call_tool("echo", {"text": "x"}),
                                             through(http_name, "echo", {"text": "x"}))
    # Throughput against the 50 ms tool, 1 and 16 clients, on warm sessions (WARM_UP: the second stdio process
    # that 16 clients need starts first; a cold start is the server's import time, not the gateway's throughput).
    for kind, server in (("stdio", stdio_name), ("http", http_name)):
        await asyncio.gather(*(through(server, "work", {"label": "w"})() for _ in range(WARM_UP)))
        runs = [await throughput(clients, args.seconds, through(server, "work", {"label": "b"}))
                for clients in (1, 16)]
        found[f"throughput_{kind}"] = runs
        found[f"speedup_16_vs_1_{kind}"] = round(runs[1]["calls_per_s"] / max(runs[0]["calls_per_s"], 1e-9), 2)
    found["sessions"] = gateway.live_sessions()
    found["processes_during"] = processes_with(stdio_name)
    return found


def serve_command(db: Path, gateway_file: Path, *more: str) -> list[str]:
    return [sys.executable, "-c", "from a2x_local.cli import main; main()", "serve", "--db", str(db), "--gateway",
            str(gateway_file), *more]


def serve_home(folder: Path) -> dict[str, str]:
    home = folder / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text('[serve]\npreload = []\ndefault_method = "bm25"\n', encoding="utf-8")
    return {**os.environ, "A2X_HOME": str(home), "PYTHONPATH": str(ROOT)}


def call_of(client: Client, service_id: str, arguments: dict):
    async def one():
        answer = await client.call_tool("call_service", {"service_id": service_id, "arguments": arguments})
        assert not answer.is_error, answer.content[0].text

    return one


async def paired_both(client: Client, stdio_name: str, http_name: str, url: str, calls: int, tag: str) -> dict:
    """The echo through ``client`` (call_service on serve) and directly, for either kind of server."""
    found = {}
    async with direct_stdio(f"{stdio_name}-direct-{tag}") as direct:
        found["latency_stdio"] = await paired(calls, echo_of(direct),
                                              call_of(client, f"{stdio_name}/echo", {"text": "x"}))
    direct_client, direct = direct_http(url)
    async with direct_client, direct:
        found["latency_http"] = await paired(calls, echo_of(direct),
                                             call_of(client, f"{http_name}/echo", {"text": "x"}))
    return found


def via_serve(folder: Path, db: Path, gateway_file: Path, stdio_name: str, http_name: str, url: str,
              args: argparse.Namespace) -> dict:
    """An agent's whole path over HTTP: `call_service` on `a2x-local serve`'s /mcp. The echo called through it and
    directly, alternately; then calls/s of the 50 ms tool from 1 and 16 agents, each its own SDK client."""
    port = free_port()
    serve = subprocess.Popen(serve_command(db, gateway_file, "--port", str(port)), cwd=ROOT,
                             env=serve_home(folder), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)

        async def run() -> dict:
            async with AsyncExitStack() as stack:
                agents = []
                for _ in range(16):
                    http = await stack.enter_async_context(httpx2.AsyncClient(
                        headers={"Authorization": "Bearer bench-token"}, timeout=httpx2.Timeout(30, read=120)))
                    agents.append(await stack.enter_async_context(Client(streamable_http_client(
                        f"http://127.0.0.1:{port}/mcp", http_client=http), mode="legacy")))
                found = await paired_both(agents[0], stdio_name, http_name, url, args.calls, "http")
                for kind, server in (("stdio", stdio_name), ("http", http_name)):
                    calls = [call_of(agent, f"{server}/work", {"label": "b"}) for agent in agents]
                    await asyncio.gather(*(call() for call in calls))       # warm sessions, as above
                    runs = [await throughput(clients, args.seconds, None, each=lambda i, c=calls: c[i]())
                            for clients in (1, 16)]
                    found[f"throughput_{kind}"] = runs
                    found[f"speedup_16_vs_1_{kind}"] = round(runs[1]["calls_per_s"] /
                                                             max(runs[0]["calls_per_s"], 1e-9), 2)
                return found

        return asyncio.run(run())
    finally:
        stop(serve)


def via_serve_stdio(folder: Path, db: Path, gateway_file: Path, stdio_name: str, http_name: str, url: str,
                    args: argparse.Namespace) -> dict:
    """A desktop agent's path: the SDK client starts `a2x-local serve --stdio` (its profile's token in
    $A2X_CLIENT_TOKEN) and calls `call_service` on that warm session; the echo through it and directly."""
    command, *rest = serve_command(db, gateway_file, "--stdio")
    params = StdioServerParameters(command=command, args=rest, cwd=str(ROOT),
                                   env={**serve_home(folder), "A2X_CLIENT_TOKEN": "bench-token"})

    async def run() -> dict:
        async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
            for _ in range(600):      # until the registry is read (a call before answers Loading)
                answer = await client.call_tool("call_service", {"service_id": f"{stdio_name}/echo",
                                                                 "arguments": {"text": "x"}})
                if not answer.is_error:
                    break
                await asyncio.sleep(0.2)
            return await paired_both(client, stdio_name, http_name, url, args.calls, "stdio")

    return asyncio.run(run())


if __name__ == "__main__":
    main()
