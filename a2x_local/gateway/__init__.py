"""The gateway: calls to the tools of the registered MCP servers, under the registry owner's rules.

The owner's gateway file names the servers (stdio commands, streamable-HTTP URLs, or their registered server.json)
and the profiles that bind client tokens to what each client may see and call (nothing is callable until allowed).
`check_servers` registers every server's tools as services; the server (`serve`) makes calls through a `Gateway`:
arguments checked against the tool's inputSchema, sessions pooled per server, a time limit, a result cap,
cancellation and progress passed on, and one audit row per call in the registry's `gateway_calls` table.
Everything else in this package is private to it.
"""

from a2x_local.gateway.audit import OUTCOMES, AuditFilter, AuditLog, prune, query_audit
from a2x_local.gateway.check import check_servers
from a2x_local.gateway.config import GatewayConfig
from a2x_local.gateway.connections import resolve_servers
from a2x_local.gateway.errors import GatewayError, GatewayFileError
from a2x_local.gateway.policy import Caller
from a2x_local.gateway.runtime import Gateway, ToolRef, gateway_path
from a2x_local.gateway.spec import GatewayFile, load_gateway_file

__all__ = [
    "OUTCOMES",
    "AuditFilter",
    "AuditLog",
    "Caller",
    "Gateway",
    "GatewayConfig",
    "GatewayError",
    "GatewayFile",
    "GatewayFileError",
    "ToolRef",
    "check_servers",
    "gateway_path",
    "load_gateway_file",
    "prune",
    "query_audit",
    "resolve_servers",
]
