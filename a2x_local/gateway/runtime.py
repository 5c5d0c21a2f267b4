"""The gateway as the server runs it: the gateway file (read again when it changes), the policy, one session pool
per server, and the one way a call is made.

A call goes through the same steps whichever way it came (the MCP tool `call_service`, a tool activated in the
dynamic mode, `POST /v1/services/{id}/call`): the service must be an MCP tool of a server in the gateway file, the
caller's profile must allow the call, the arguments must fit the size limit and the tool's inputSchema; only then
is anything sent, through the server's pool, within the time limit, and the answer must fit the result cap. Every
call, made or refused, leaves one audit row.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from a2x_local.gateway.audit import AuditLog, AuditRow, arguments_digest, canonical, redacted_preview
from a2x_local.gateway.config import GatewayConfig
from a2x_local.gateway.connections import ServerEntry, resolve_servers
from a2x_local.gateway.errors import GatewayError, GatewayFileError, denied
from a2x_local.gateway.policy import Caller, Policy
from a2x_local.gateway.pool import GatewayLoop, ServerPool
from a2x_local.gateway.spec import GatewayFile, load_gateway_file
from a2x_local.gateway.validate import check_arguments
from a2x_local.registry import Service
from a2x_local.settings import Settings

log = logging.getLogger("a2x_local.gateway")
Report = Callable[[float, float | None, str], Awaitable[None]]
GATEWAY_FILE_NAME = "gateway.toml"


def gateway_path(settings: Settings, config: GatewayConfig, given: Path | None = None) -> Path | None:
    """The gateway file in force: ``given`` (--gateway), else `[gateway] file`, else $A2X_HOME/gateway.toml when it
    exists; None when there is none (nothing is callable)."""
    if given is not None:
        return Path(given).expanduser().resolve()
    if config.file:
        path = Path(config.file).expanduser()
        return (path if path.is_absolute() else settings.home / path).resolve()
    default = settings.home / GATEWAY_FILE_NAME
    return default if default.is_file() else None


@dataclass(frozen=True)
class ToolRef:
    """What a registered MCP tool service says about calling it: its server, its name and its inputSchema."""

    service_id: str
    server: str
    tool: str
    schema: Any
    description: str

    @classmethod
    def of(cls, service: Service) -> ToolRef:
        metadata = service.metadata or {}
        server, tool = metadata.get("server"), metadata.get("tool")
        if service.type != "mcp_tool" or not isinstance(server, str) or not isinstance(tool, str):
            raise GatewayError(f"service '{service.id[:200]}' is a {service.type}, not a callable MCP tool (no server "
                               "and tool in its metadata)", code="NotAnMcpTool", status=400, outcome="invalid",
                               hint="search with type mcp_tool; an MCP server's tools are registered by "
                                    "`a2x-local gateway check`")
        return cls(service.id, server, tool, metadata.get("inputSchema"), service.description)


class Gateway:
    """See the module docstring. ``audit`` None: nothing is recorded (tests of the pool alone)."""

    def __init__(self, config: GatewayConfig, path: Path | None, *, audit: AuditLog | None = None) -> None:
        self.config = config
        self.path = path
        self.audit = audit
        self.file: GatewayFile | None = None
        self.policy = Policy.closed()
        self.problem: str | None = None
        self.loop = GatewayLoop()
        self.pools: dict[str, ServerPool] = {}
        self.retired: list[ServerPool] = []      # pools of connections the file changed, closing
        self._stamp: tuple[int, int] | None = None
        self._resolved: tuple[Any, dict[str, ServerEntry], dict[str, GatewayError]] | None = None
        if path is not None:
            self._load()

    @property
    def enabled(self) -> bool:
        return self.file is not None

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            stat = self.path.stat() if self.path is not None else None
        except OSError:
            return None
        return (stat.st_mtime_ns, stat.st_size) if stat is not None else None

    def _load(self) -> None:
        assert self.path is not None
        stamp = self._file_stamp()
        file = load_gateway_file(self.path)
        self.policy = Policy.from_file(file)
        self.file = file
        self._stamp = stamp
        self._resolved = None
        self.problem = None

    def refresh(self) -> None:
        """Read the gateway file again when it changed; a file that became invalid leaves the last good one in force
        (the problem is logged and shown on /healthz)."""
        if self.path is None or self._file_stamp() == self._stamp:
            return
        try:
            self._load()
            log.info("gateway file reloaded: %s", self.path)
        except GatewayFileError as exc:
            self._stamp = self._file_stamp()
            if exc.message != self.problem:
                log.error("gateway file not reloaded, the previous one stays in force: %s", exc.message)
            self.problem = exc.message

    def servers(self, services: Mapping[str, Service]) -> tuple[dict[str, ServerEntry], dict[str, GatewayError]]:
        """The file's servers resolved against the registry (a `registry = true` server reads its server.json),
        once per file version and registry snapshot."""
        if self.file is None:
            return {}, {}
        key = (self._stamp, id(services))
        if self._resolved is None or self._resolved[0] != key:
            entries, problems = resolve_servers(self.file, dict(services))
            self._resolved = (key, entries, problems)
        return self._resolved[1], self._resolved[2]

    def caller(self, token: str | None, *, anonymous: str = "anonymous") -> Caller | None:
        self.refresh()
        return self.policy.caller(token, anonymous=anonymous)

    def _pool(self, entry: ServerEntry) -> ServerPool:
        """The server's pool (made on the gateway loop); a server whose connection changed gets a new one."""
        pool = self.pools.get(entry.name)
        if pool is not None and pool.entry != entry:
            pool.retire()        # its calls in flight finish on it
            self.retired = [old for old in self.retired if old.live()] + [pool]
            pool = None
        if pool is None:
            pool = ServerPool(entry, max_sessions=entry.max_sessions or self.config.max_sessions_per_server,
                              max_calls=self.config.max_calls_per_session,
                              start_timeout_s=entry.start_timeout_s or self.config.start_timeout_s,
                              idle_stop_s=self.config.idle_stop_s)
            self.pools[entry.name] = pool
        return pool

    async def _on_loop(self, entry: ServerEntry, tool: str, arguments: dict[str, Any], timeout_s: float,
                       progress: Any) -> Any:
        return await self._pool(entry).call(tool, arguments, timeout_s=timeout_s, progress=progress)

    async def call(self, caller: Caller, service_id: str, service: Service | None, arguments: Any, *,
                   services: Mapping[str, Service], via: str, report: Report | None = None,
                   server_hint: str | None = None) -> Any:
        """Make one call (see the module docstring): the server's `CallToolResult`, or a `GatewayError` naming
        the server; either way one audit row."""
        self.refresh()
        started, at = time.monotonic(), datetime.now(UTC).replace(tzinfo=None)
        row = AuditRow(called_at=at, profile=caller.profile.name, client=caller.key, via=via, service_id=service_id,
                       server=server_hint, tool=None, arguments_sha256=None, arguments_preview=None,
                       arguments_bytes=None, duration_ms=0.0, outcome="failed")
        try:
            if self.audit is not None and self.audit.full():
                raise GatewayError(f"the audit could not be written for a while ({self.audit.problem}); calls are "
                                   "refused until it can", code="AuditUnavailable", status=503, outcome="failed",
                                   hint="the registry file must be writable by the server and not held by another "
                                        "process for long")
            if isinstance(arguments, dict | list):
                text = canonical(arguments)
                row.arguments_sha256, row.arguments_bytes = arguments_digest(arguments), len(text.encode())
                row.arguments_preview = redacted_preview(arguments)
                if self.config.audit_text:
                    row.arguments_text = text[:self.config.audit_text_chars]
            if service is None:
                where = f" (a tool of server '{server_hint}')" if server_hint else ""
                raise GatewayError(f"no service with id '{service_id[:200]}'{where} in the registry now: it was "
                                   "removed, or never registered", code="NoSuchService", status=404,
                                   outcome="invalid", hint="search again; `a2x-local gateway check` registers a "
                                                           "server's tools")
            ref = ToolRef.of(service)
            row.server, row.tool = ref.server, ref.tool
            if not caller.profile.may_call(service_id):
                raise denied(service_id, caller.profile.name)
            entries, problems = self.servers(services)
            entry = entries.get(ref.server)
            if entry is None:
                if ref.server in problems:
                    raise problems[ref.server]
                raise GatewayError(f"server '{ref.server}' is not in the gateway file, so its tools cannot be called",
                                   code="NoConnection", status=503, outcome="failed",
                                   hint=f"add [servers.\"{ref.server}\"] to the gateway file (docs/gateway.md)")
            if row.arguments_bytes is not None and row.arguments_bytes > self.config.max_argument_bytes:
                raise GatewayError(f"arguments for tool '{ref.tool}' of server '{ref.server}' are "
                                   f"{row.arguments_bytes:,} bytes; the gateway forwards at most "
                                   f"{self.config.max_argument_bytes:,}", code="ArgumentsTooLarge", status=413,
                                   outcome="too_large", hint="send less ([gateway] max_argument_bytes sets it)")
            check_arguments(ref.server, ref.tool, ref.schema, arguments)
            result = await self.loop.run(self._on_loop(entry, ref.tool, arguments,
                                                       entry.call_timeout_s or self.config.call_timeout_s,
                                                       _forwarder(report)))
            size = len(result.model_dump_json(by_alias=True, exclude_none=True).encode())
            row.result_bytes = size
            if size > self.config.max_result_bytes:
                raise GatewayError(f"server '{ref.server}' answered tool '{ref.tool}' with {size:,} bytes; the "
                                   f"gateway passes at most {self.config.max_result_bytes:,}",
                                   code="ResultTooLarge", status=502, outcome="too_large",
                                   hint="ask for less (narrower arguments); [gateway] max_result_bytes sets the cap")
            row.outcome = "tool_error" if result.is_error else "ok"
            if self.config.audit_text:
                row.result_text = _result_text(result)[:self.config.audit_text_chars]
            return result
        except GatewayError as exc:
            row.outcome, row.error = exc.outcome, f"{exc.code}: {exc.message}"[:2000]
            raise
        except asyncio.CancelledError:
            row.outcome, row.error = "cancelled", "the caller cancelled the call"
            raise
        except Exception as exc:
            log.error("a gateway call of %s failed", service_id, exc_info=exc)
            row.outcome, row.error = "failed", f"InternalError: {type(exc).__name__}"
            raise GatewayError(f"the call of '{service_id[:200]}' failed inside the gateway: {type(exc).__name__}",
                               code="GatewayFailed", status=500, hint="see the server's log") from exc
        finally:
            row.duration_ms = round((time.monotonic() - started) * 1000, 3)
            if self.audit is not None:
                self.audit.record(row)

    def record_refusal(self, *, profile: str, client: str, via: str, service_id: str, outcome: str,
                       error: str) -> None:
        """The audit row of a call refused before it reached `call` (a token no profile knows, a body over the
        HTTP limit, one that is not a call's shape): the issue's "every call, allowed or refused". Nothing of the
        body is kept, not even its digest: it was never read whole, or never valid."""
        if self.audit is None:
            return
        self.audit.record(AuditRow(called_at=datetime.now(UTC).replace(tzinfo=None), profile=profile, client=client,
                                   via=via, service_id=service_id[:1000], server=None, tool=None,
                                   arguments_sha256=None, arguments_preview=None, arguments_bytes=None,
                                   duration_ms=0.0, outcome=outcome, error=error[:2000]))

    def live_sessions(self) -> dict[str, int]:
        return {name: pool.live() for name, pool in self.pools.items() if pool.live()}

    def _all_pools(self) -> list[ServerPool]:
        pools, self.pools, self.retired = [*self.pools.values(), *self.retired], {}, []
        return pools

    async def aclose(self) -> None:
        """Stop every session, from the loop the sessions live on (a server that adopted its own loop closes the
        sessions there before the loop ends); `close` still writes the audit."""
        await self.loop.aclose(self._all_pools())

    def close(self) -> None:
        """Stop every session (their processes) and write the audit rows still held."""
        self.loop.close(self._all_pools())
        if self.audit is not None:
            self.audit.close()


def _forwarder(report: Report | None) -> Any:
    """A progress callback for the gateway loop that hands each notification to the caller's loop (never waits)."""
    if report is None:
        return None
    caller_loop = asyncio.get_running_loop()

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        asyncio.run_coroutine_threadsafe(report(progress, total, message or ""), caller_loop)

    return forward


def _result_text(result: Any) -> str:
    return " ".join(getattr(block, "text", f"<{getattr(block, 'type', 'content')}>") for block in result.content)
