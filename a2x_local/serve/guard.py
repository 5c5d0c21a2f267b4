"""The server's front door, for every HTTP request (API, /mcp, page): where it may come from, who may ask, how much.

- Bind address: loopback unless the operator gives a token, or says `--insecure` on purpose.
- Host header: on a loopback bind only loopback names are served, so a web page elsewhere cannot reach the server
  through a rebound DNS name (the MCP SDK checks /mcp the same way).
- Token: `Authorization: Bearer T`, compared in constant time; the page, its static files and /healthz stay open
  (they carry no registry data; the page asks for the token when the API answers 401).
- Body size: a body over the limit is refused with 413 before any handler reads it.
Every refusal is the same JSON as every other error: {"error", "message", "hint"}.

A small ASGI class rather than Starlette's TrustedHostMiddleware and a separate body-size layer, so the three
checks share one pass over the request and answer in the API's JSON error format.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Callable
from typing import Any

from a2x_local.errors import UserError
from a2x_local.serve.access import CALLER

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
# Open without a token: the page, health, and the API's description (none of them carries registry data).
OPEN_PATHS = frozenset({"/", "/healthz", "/readyz", "/favicon.ico", "/docs", "/openapi.json"})
OPEN_PREFIXES = ("/static/", "/static-offline-docs/")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

Scope = dict[str, Any]


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, insecure: bool) -> None:
    """Refuse to listen beyond this machine without a token, unless the operator said --insecure."""
    if is_loopback(host) or token or insecure:
        return
    raise UserError(f"refusing to listen on {host} without a token: anyone who can reach it could read the registry",
                    hint="give --token T (clients send 'Authorization: Bearer T'), or --insecure if the network is "
                         "trusted; the default 127.0.0.1 needs neither", code="UnsafeBind")


def mcp_host_patterns(host: str) -> tuple[list[str], list[str]]:
    """(Host, Origin) patterns the MCP SDK's DNS-rebinding check accepts on a loopback bind: the loopback names and
    the address the server was started on (``--host 127.0.0.2``: the SDK's own default knows only 127.0.0.1,
    localhost and ::1, and answered 421 to every /mcp request on any other loopback address)."""
    names = ["127.0.0.1", "localhost", "[::1]"]
    bound = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host
    if bound not in names:
        names.append(bound)
    hosts = [pattern for name in names for pattern in (name, f"{name}:*")]
    origins = [pattern for name in names for pattern in (f"http://{name}", f"http://{name}:*")]
    return hosts, origins


def _host_name(value: str) -> str:
    """The name of a Host header, without the port (IPv6 literals keep no brackets)."""
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Guard:
    """ASGI middleware applying the checks above. With a gateway (``callers``: a bearer token, or None, to the
    caller it makes, None for a token no profile knows), a request may also bring a profile's token: it is served
    as that profile's client (`access.CALLER`); an unknown token is refused, never served as the default profile."""

    def __init__(self, app: Any, *, token: str | None, loopback_only: bool, max_body_bytes: int,
                 callers: Callable[[str | None], Any] | None = None,
                 refused: Callable[[str, Any, str, int, str, str], None] | None = None) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.loopback_only = loopback_only
        self.max_body_bytes = max_body_bytes
        self.callers = callers
        # Told of each POST refused here (path, caller, bearer, status, code, message): a gateway call's audit row.
        self.refused = refused

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope.get("headers", [])}
        if self.loopback_only and not is_loopback(_host_name(headers.get("host", ""))):
            await _refuse(send, 400, "BadHost", "this server answers only requests addressed to this machine "
                          "(localhost / 127.0.0.1)", "use http://127.0.0.1:PORT/")
            return
        path = scope.get("path", "")
        mcp = path == "/mcp" or path.startswith("/mcp/")
        guarded = path not in OPEN_PATHS and not path.startswith(OPEN_PREFIXES)
        scheme, _, given = headers.get("authorization", "").partition(" ")
        bearer = given.strip() if scheme.lower() == "bearer" else ""
        caller, denied = None, False
        if guarded:
            own = self.token is not None and bool(bearer) and hmac.compare_digest(bearer.encode(), self.token)
            if self.callers is None:
                denied = self.token is not None and not own
            elif self.token is not None and not bearer:
                denied = True
            else:       # the server's own token, or none where none is needed, serves the default profile
                caller = self.callers(None if own or not bearer else bearer)
                denied = caller is None
        if denied:
            sent = bool(bearer)
            message = ("the bearer token sent is not this server's" if sent else
                       "this server needs a bearer token, and the request sent none")
            self._tell(scope, None, bearer, 401, "Unauthorized", message)
            await _refuse(send, 401, "Unauthorized", message,
                          "send the header 'Authorization: Bearer TOKEN' with the token the server was started "
                          "with (--token or $A2X_SERVE_TOKEN), or a token of a gateway profile; docs/serve.md shows "
                          "it for MCP clients and the Python SDK", extra=[(b"www-authenticate",
                                                                          b'Bearer realm="a2x-local", '
                                                                          b'error="invalid_token"' if sent
                                                                          else b'Bearer realm="a2x-local"')],
                          jsonrpc=mcp)
            return
        if caller is not None:
            CALLER.set(caller)      # this request's task (and the tasks it starts) serve this caller
        if scope.get("method") in _BODY_METHODS:
            declared = headers.get("content-length")
            body = None
            if declared is None or not declared.isdigit() or int(declared) <= self.max_body_bytes:
                body = await _read_body(receive, self.max_body_bytes)
            if body is None:
                self._tell(scope, caller, bearer, 413, "TooLarge", _too_large_message(self.max_body_bytes))
                await _too_large(send, self.max_body_bytes)
                return
            receive = _replay(body, receive)
        await self.app(scope, receive, send)

    def _tell(self, scope: Scope, caller: Any, bearer: str, status: int, code: str, message: str) -> None:
        if self.refused is not None and scope.get("method") == "POST":
            self.refused(scope.get("path", ""), caller, bearer, status, code, message)


async def _read_body(receive: Any, limit: int) -> bytes | None:
    """The whole body, or None as soon as it passes ``limit`` bytes."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Any) -> Any:
    """A receive channel that hands the buffered body over once, then waits on the real one (disconnects)."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _too_large_message(limit: int) -> str:
    return f"the request body is larger than {limit:,} bytes"


async def _too_large(send: Any, limit: int) -> None:
    await _refuse(send, 413, "TooLarge", _too_large_message(limit), "send less (one search is a few hundred bytes)")


# JSON-RPC's range for server errors; an MCP client shows a JSON-RPC error body as it is (the official SDK, for one,
# would otherwise report only "Server returned an error response").
MCP_REFUSED = -32001


async def _refuse(send: Any, status: int, code: str, message: str, hint: str,
                  extra: list[tuple[bytes, bytes]] | None = None, *, jsonrpc: bool = False) -> None:
    error = {"error": code, "message": message, "hint": hint}
    if jsonrpc:   # for /mcp: a JSON-RPC error whose message names the code and the hint, the usual body as data
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": MCP_REFUSED, "message": f"{code}: {message} "
                                                         f"(hint: {hint})", "data": error}}
    body = json.dumps(error).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
