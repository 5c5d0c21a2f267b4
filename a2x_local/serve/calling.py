"""Calls through the gateway as a server operation: the MCP tool `call_service`, `POST /v1/services/{id}/call`, and
the dynamic mode (`activate_services` adds found tools to this client's own `tools/list` under their own names;
`deactivate_services` removes them).

A call looks its service up in the current registry snapshot (so a tool removed from the registry is refused, and
its activation disappears from `tools/list`), then hands it to the gateway, which checks, forwards and audits.
Activations belong to a client: the stdio process's one client, or over HTTP the bearer token it sends (clients
without a token share one set, and the default profile calls nothing unless the owner allows it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from a2x_local.gateway import Caller, Gateway, GatewayError, ToolRef
from a2x_local.serve.access import CALLER
from a2x_local.serve.discovery import Discovery
from a2x_local.serve.errors import BadRequest
from a2x_local.serve.progress import Report

MAX_CLIENTS = 1024     # clients whose activations are kept (the least recently active are forgotten first)


@dataclass(frozen=True)
class Activation:
    """A tool activated for one client: the name it is listed under, and the service it calls."""

    name: str
    service_id: str
    server: str
    description: str
    schema: dict[str, Any]


class Calling:
    """The gateway's calls and the clients' activated tools (see the module docstring)."""

    def __init__(self, discovery: Discovery, gateway: Gateway, reserved: set[str]) -> None:
        self.discovery = discovery
        self.gateway = gateway
        self.reserved = reserved          # the server's own tool names: never shadowed by an activation
        self._active: OrderedDict[str, OrderedDict[str, Activation]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.gateway.enabled

    def caller(self) -> Caller:
        """The caller of the request being answered: set by the guard (HTTP) or the stdio server; in-process, the
        default profile."""
        caller = CALLER.get()
        if caller is not None:
            return caller
        default = self.gateway.caller(None, anonymous="in-process")
        assert default is not None
        return default

    async def call(self, service_id: str, arguments: Any, *, via: str, report: Report | None = None,
                   server_hint: str | None = None) -> Any:
        """One call (the server's `CallToolResult`); refusals and failures raise errors naming the server."""
        if not isinstance(service_id, str) or not service_id:
            raise BadRequest("no service id given", code="NoSuchService", hint="search first; hits carry the ids")
        snapshot = await self.discovery.snapshot()
        return await self.gateway.call(self.caller(), service_id, snapshot.services.get(service_id), arguments,
                                       services=snapshot.services, via=via, report=report, server_hint=server_hint)

    # --- the dynamic mode ---------------------------------------------------------------------------------------

    def _mine(self, caller: Caller) -> OrderedDict[str, Activation]:
        with self._lock:
            mine = self._active.setdefault(caller.key, OrderedDict())
            self._active.move_to_end(caller.key)
            while len(self._active) > MAX_CLIENTS:
                self._active.popitem(last=False)
            return mine

    async def activate(self, service_ids: list[str]) -> list[tuple[str, str | None, str]]:
        """Activate each service for the calling client: (id, the tool name it is listed under or None, what
        happened). Only tools the caller may call are activated."""
        caller = self.caller()
        snapshot = await self.discovery.snapshot()
        mine = self._mine(caller)
        done: list[tuple[str, str | None, str]] = []
        for service_id in service_ids:
            service = snapshot.services.get(service_id)
            try:
                if service is None or not caller.profile.may_see(service_id):
                    raise GatewayError(f"no service with id '{service_id[:200]}'", code="NoSuchService",
                                       hint="search first; the hits carry the ids")
                ref = ToolRef.of(service)
                if not caller.profile.may_call(service_id):
                    raise GatewayError(f"profile '{caller.profile.name}' may not call it", code="NotCallable",
                                       hint="the registry owner allows calls in the gateway file")
                taken = mine.get(ref.tool)
                if ref.tool in self.reserved or (taken is not None and taken.service_id != service_id):
                    other = "this server's own tool" if ref.tool in self.reserved else f"'{taken.service_id}'"
                    raise GatewayError(f"its name '{ref.tool}' is already listed for {other}; call it with "
                                       "call_service instead", code="NameTaken",
                                       hint="deactivate_services frees a name")
                if ref.tool not in mine and len(mine) >= self.gateway.config.max_activated:
                    raise GatewayError(f"{len(mine)} tools are active already (at most "
                                       f"{self.gateway.config.max_activated}); deactivate some first",
                                       code="TooManyActive", hint="deactivate_services removes tools")
                schema = ref.schema if isinstance(ref.schema, dict) else {"type": "object"}
                mine[ref.tool] = Activation(ref.tool, service_id, ref.server,
                                            caller.profile.description(service_id, ref.description), schema)
                done.append((service_id, ref.tool, f"listed as tool '{ref.tool}' (server '{ref.server}')"))
            except GatewayError as exc:
                done.append((service_id, None, f"{exc.code}: {exc.message}"))
        return done

    def deactivate(self, names: list[str]) -> list[tuple[str, bool]]:
        """Remove activations by service id or tool name; (what was named, whether it was active)."""
        mine = self._mine(self.caller())
        found = []
        for name in names:
            key = name if name in mine else next((k for k, a in mine.items() if a.service_id == name), None)
            found.append((name, key is not None and mine.pop(key, None) is not None))
        return found

    async def active(self) -> list[Activation]:
        """The calling client's activations that still stand: the service still registered and still callable
        under the current gateway file (a removed or newly denied tool leaves the list)."""
        caller = self.caller()
        with self._lock:
            mine = self._active.get(caller.key)
            if not mine:
                return []
            listed = list(mine.values())
        snapshot = await self.discovery.snapshot()
        return [a for a in listed if a.service_id in snapshot.services and caller.profile.may_call(a.service_id)]

    def activation(self, name: str) -> Activation | None:
        with self._lock:
            return (self._active.get(self.caller().key) or {}).get(name)

    def describe(self) -> dict[str, Any]:
        """For /healthz: the gateway file, its servers' live sessions, the audit's state."""
        audit = self.gateway.audit
        return {"file": str(self.gateway.path) if self.gateway.path else None,
                "servers": sorted(self.gateway.file.servers) if self.gateway.file is not None else [],
                "sessions": self.gateway.live_sessions(),
                "audit_pending": audit.pending if audit is not None else 0,
                "problem": self.gateway.problem or (audit.problem if audit is not None else None)}
