"""Calls through the gateway as a server operation: the MCP tool `call_service`, `POST /v1/services/{id}/call`, and
the dynamic mode (`activate_services` adds found tools to this client's own `tools/list` under their own names;
`deactivate_services` removes them).

A call looks its service up in the current registry snapshot (so a tool removed from the registry is refused, and
its activation disappears from `tools/list`), then hands it to the gateway, which checks, forwards and audits.
Activations belong to a client: the stdio process's one client, or over HTTP the bearer token it sends (clients
without a token share one set, and the default profile calls nothing unless the owner allows it). An activation
that stops standing (its tool removed from the registry, or no longer callable under the gateway file in force)
leaves `tools/list` at once, and `watch` tells the clients that can hear it (`notifications/tools/list_changed`).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from a2x_local.errors import A2XError
from a2x_local.gateway import Caller, Gateway, GatewayError, ToolRef
from a2x_local.serve.access import CALLER
from a2x_local.serve.discovery import Discovery
from a2x_local.serve.errors import BadRequest
from a2x_local.serve.progress import Report

log = logging.getLogger("a2x_local.serve")
MAX_CLIENTS = 1024     # clients whose activations are kept (the least recently active are forgotten first)
WATCH_S = 1.0          # how often standing activations are checked against the registry and the gateway file
CALL_PATH = re.compile(r"/v1/services/(?P<service>.+)/call")
Notify = Callable[[], Awaitable[None]]


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
        self._callers: dict[str, Caller] = {}     # each client's caller when it last activated
        # Activations dropped because they stopped standing, per client: a call by such a name still goes to the
        # gateway, whose refusal names the tool's server (not the SDK's "Unknown tool").
        self._dropped: dict[str, OrderedDict[str, Activation]] = {}
        self._lock = threading.Lock()
        # Who hears that a client's tools changed: the stdio connection, the subscriptions/listen streams.
        self.notifiers: list[Notify] = []

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
            self._callers[caller.key] = caller
            self._active.move_to_end(caller.key)
            while len(self._active) > MAX_CLIENTS:
                gone, _ = self._active.popitem(last=False)
                self._callers.pop(gone, None)
                self._dropped.pop(gone, None)
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
                with self._lock:
                    self._dropped.get(caller.key, {}).pop(ref.tool, None)
                done.append((service_id, ref.tool, f"listed as tool '{ref.tool}' (server '{ref.server}')"))
            except GatewayError as exc:
                done.append((service_id, None, f"{exc.code}: {exc.message}"))
        return done

    def deactivate(self, names: list[str]) -> list[tuple[str, bool]]:
        """Remove activations by service id or tool name; (what was named, whether it was active)."""
        caller = self.caller()
        mine = self._mine(caller)
        found = []
        for name in names:
            key = name if name in mine else next((k for k, a in mine.items() if a.service_id == name), None)
            found.append((name, key is not None and mine.pop(key, None) is not None))
            with self._lock:
                gone = self._dropped.get(caller.key, {})
                for dropped in [k for k, a in gone.items() if name in (k, a.service_id)]:
                    del gone[dropped]
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

    def activation(self, name: str, key: str | None = None) -> Activation | None:
        """The activation listed as ``name`` for the calling client (or the client ``key``), or one dropped under
        that name since (its call is refused by the gateway, with the server named)."""
        key = key or self.caller().key
        with self._lock:
            return (self._active.get(key) or {}).get(name) or (self._dropped.get(key) or {}).get(name)

    async def drop_stale(self) -> bool:
        """Forget the activations that no longer stand: their service left the registry, or the client's profile
        under the gateway file in force now may not call it (a token no longer bound: none of its tools). True when
        one was forgotten, i.e. some client's tools/list changed."""
        with self._lock:
            clients = [(key, self._callers.get(key), list(mine.values())) for key, mine in self._active.items()
                       if mine]
        if not clients:
            return False
        self.gateway.refresh()
        snapshot = await self.discovery.snapshot()
        dropped = False
        for key, caller, listed in clients:
            now = self.gateway.policy.again(caller) if caller is not None else None
            stale = [a for a in listed if a.service_id not in snapshot.services or now is None
                     or not now.profile.may_call(a.service_id)]
            with self._lock:
                mine = self._active.get(key, {})
                for activation in stale:
                    if mine.get(activation.name) == activation:
                        del mine[activation.name]
                        gone = self._dropped.setdefault(key, OrderedDict())
                        gone[activation.name] = activation
                        while len(gone) > self.gateway.config.max_activated:
                            gone.popitem(last=False)
                        dropped = True
        return dropped

    async def changed(self) -> None:
        """notifications/tools/list_changed to everyone who can hear it (a closed channel is skipped)."""
        for notify in list(self.notifiers):
            try:
                await notify()
            except Exception as exc:      # a client gone meanwhile: the others are still told
                log.debug("a tools/list_changed notification was not delivered: %s", exc)

    async def watch(self, every_s: float = WATCH_S) -> None:
        """Until cancelled (the server's end): every ``every_s``, forget stale activations and say the list
        changed when one went, so a client's tools/list follows a removal or a gateway file change unasked."""
        while True:
            await asyncio.sleep(every_s)
            try:
                if await self.drop_stale():
                    await self.changed()
            except A2XError:      # the registry is loading or busy: next time
                continue
            except Exception as exc:
                log.error("checking the activated tools failed", exc_info=exc)

    def refused_before(self, path: str, caller: Caller | None, bearer: str, status: int, code: str,
                       message: str) -> None:
        """The audit row of a `POST /v1/services/{id}/call` the HTTP layer refused before the gateway saw it (401
        a token no profile knows, 413 a body over [serve] max_body_bytes, 422 a body of the wrong shape)."""
        found = CALL_PATH.fullmatch(path)
        if found is None:
            return
        if caller is None:
            caller = Caller.unbound(Caller.key_of(bearer or None))
        outcome = {401: "denied", 413: "too_large"}.get(status, "invalid")
        self.gateway.record_refusal(profile=caller.profile.name, client=caller.key, via="http",
                                    service_id=found.group("service"), outcome=outcome, error=f"{code}: {message}")

    def describe(self) -> dict[str, Any]:
        """For /healthz: the gateway file, its servers' live sessions, the audit's state."""
        audit = self.gateway.audit
        return {"file": str(self.gateway.path) if self.gateway.path else None,
                "servers": sorted(self.gateway.file.servers) if self.gateway.file is not None else [],
                "sessions": self.gateway.live_sessions(),
                "audit_pending": audit.pending if audit is not None else 0,
                "problem": self.gateway.problem or (audit.problem if audit is not None else None)}


class StdioClient:
    """MCP middleware of `serve --stdio`: each request's caller, found from the client's token
    ($A2X_CLIENT_TOKEN) under the gateway file in force now, so a changed file (a token revoked, a profile narrowed)
    applies from the next request rather than from the next start. A token no longer bound to a profile is refused
    on every request but the handshake (JSON-RPC error, "Unauthorized"), its calls audited as denied. The client's
    connection is kept, to tell it when its activated tools change."""

    def __init__(self, calling: Calling, token: str | None) -> None:
        self.calling = calling
        self.token = token
        self.key = Caller.key_of(token, anonymous="stdio")    # as the policy names this client
        self.session: Any = None

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        if self.session is None and getattr(ctx, "session", None) is not None:
            self.session = ctx.session
            self.calling.notifiers.append(self.session.send_tool_list_changed)
        caller = self.calling.gateway.caller(self.token, anonymous="stdio")
        if caller is None:
            if ctx.method != "initialize" and not ctx.method.startswith("notifications/"):
                self._refuse(ctx)
            caller = Caller.unbound(self.key)       # sees nothing, calls nothing
        CALLER.set(caller)
        return await call_next(ctx)

    def _refuse(self, ctx: Any) -> None:
        from mcp.shared.exceptions import MCPError

        message = ("the token in $A2X_CLIENT_TOKEN is no longer bound to a profile of the gateway file (it was "
                   "changed); hint: ask the registry owner for a token, then restart the client's server")
        params = ctx.params if isinstance(ctx.params, dict) else {}
        if ctx.method == "tools/call":
            name = str(params.get("name"))
            arguments = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
            activation = self.calling.activation(name, self.key)
            service_id = str(arguments.get("service_id")) if name == "call_service" else (
                activation.service_id if activation is not None else None)
            if service_id is not None:
                nobody = Caller.unbound(self.key)
                self.calling.gateway.record_refusal(profile=nobody.profile.name, client=nobody.key,
                                                    via="call_service" if name == "call_service" else "tool",
                                                    service_id=service_id, outcome="denied",
                                                    error=f"Unauthorized: {message}")
        raise MCPError(code=-32001, message=f"Unauthorized: {message}")
