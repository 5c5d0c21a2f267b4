"""How to reach each MCP server the gateway may call: a command run without a shell (stdio) or a URL (streamable
HTTP), from the gateway file, or from a registered server.json's `packages` / `remotes` when the file says so.

Secrets (header values, tokens) are read from the environment or a file when a connection is opened, never kept in
the registry or the gateway file. A stdio server receives the SDK's minimal environment (PATH, HOME, ...) plus only
the variables the gateway file names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2x_local.gateway.errors import GatewayError
from a2x_local.gateway.spec import GatewayFile, Secret, ServerSpec
from a2x_local.jsonfiles import read_bytes
from a2x_local.registry import Service

SECRET_MAX_BYTES = 64 * 1024
# registryType -> the runner that fetches and starts such a package when no runtimeHint says otherwise
RUNNERS = {"pypi": "uvx", "npm": "npx", "oci": "docker"}


@dataclass(frozen=True)
class StdioTarget:
    """A server started as a process: `command` with `args`, no shell; `env` names the variables it receives."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    cwd: str | None = None

    def describe(self) -> str:
        return " ".join([self.command, *self.args])[:300]


@dataclass(frozen=True)
class HttpTarget:
    """A server reached over streamable HTTP; header values are secrets read when the session opens."""

    url: str
    headers: tuple[tuple[str, Secret], ...] = ()

    def describe(self) -> str:
        return self.url


Target = StdioTarget | HttpTarget


@dataclass(frozen=True)
class ServerEntry:
    """One server of the gateway file, resolved: its name, how to reach it, its own limits."""

    name: str
    target: Target
    max_sessions: int | None = None
    start_timeout_s: float | None = None
    call_timeout_s: float | None = None
    origin: str = "gateway file"
    notes: tuple[str, ...] = field(default=())


def read_secret(secret: Secret, what: str) -> str:
    """The secret's value (with its prefix); a missing variable or file is an error naming ``what``."""
    if secret.env is not None:
        value = os.environ.get(secret.env)
        if not value:
            raise GatewayError(f"{what}: the environment variable {secret.env} is not set", code="NoSecret",
                               status=503, hint=f"export {secret.env} in the environment of the process that serves "
                                                "(a systemd EnvironmentFile=, for one)")
        return secret.prefix + value
    assert secret.file is not None
    try:
        value = read_bytes(Path(secret.file), SECRET_MAX_BYTES, what="secret").decode("utf-8").strip()
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise GatewayError(f"{what}: cannot read {secret.file}: {exc}", code="NoSecret", status=503,
                           hint="give the serving user read access to the file (and no one else)") from exc
    except Exception as exc:   # the bounded reader's own error: a folder, a device, too large
        raise GatewayError(f"{what}: {getattr(exc, 'message', exc)}", code="NoSecret", status=503,
                           hint="point file = at a small regular file holding only the value") from exc
    if not value:
        raise GatewayError(f"{what}: {secret.file} is empty", code="NoSecret", status=503,
                           hint="write the value into the file")
    return secret.prefix + value


def child_environment(target: StdioTarget) -> dict[str, str]:
    """The variables a stdio server receives beyond the SDK's minimal set: exactly those the gateway file names
    and this process has (a named variable that is not set is left out)."""
    return {name: os.environ[name] for name in target.env if name in os.environ}


def _argument_values(arguments: Any) -> list[str]:
    """server.json `runtimeArguments` / `packageArguments` as argv items: positional values, named `--flag value`."""
    found: list[str] = []
    for argument in arguments or []:
        if not isinstance(argument, dict):
            continue
        value = argument.get("value", argument.get("default"))
        if argument.get("type") == "named" and isinstance(argument.get("name"), str):
            found.append(argument["name"])
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            found.append(str(value))
    return found


def _package_target(server: str, package: dict[str, Any], spec: ServerSpec) -> StdioTarget:
    """A stdio command for a server.json package (pypi with uvx, npm with npx, oci with docker, or its runtimeHint)."""
    kind = package.get("registryType") or package.get("registry_type") or package.get("registry_name")
    identifier = package.get("identifier") or package.get("name")
    transport = package.get("transport") if isinstance(package.get("transport"), dict) else {"type": "stdio"}
    if transport.get("type", "stdio") != "stdio":
        raise GatewayError(f"server '{server}': its package speaks {transport.get('type')!r}, not stdio",
                           code="NoConnection", status=503,
                           hint="use one of its remotes (remote = N), or give command/url in the gateway file")
    if not isinstance(identifier, str) or not identifier:
        raise GatewayError(f"server '{server}': its package names no identifier", code="NoConnection", status=503,
                           hint="give command = \"...\" in the gateway file")
    runner = package.get("runtimeHint") or package.get("runtime_hint") or RUNNERS.get(str(kind))
    if runner is None:
        raise GatewayError(f"server '{server}': packages of type {kind!r} cannot be started here",
                           code="NoConnection", status=503,
                           hint="install it yourself and give command = \"...\" in the gateway file")
    version = package.get("version")
    env_names = [item["name"] for item in package.get("environmentVariables") or package.get(
        "environment_variables") or [] if isinstance(item, dict) and isinstance(item.get("name"), str)]
    allowed = tuple(name for name in env_names if name in spec.env) + tuple(
        name for name in spec.env if name not in env_names)
    runtime = _argument_values(package.get("runtimeArguments") or package.get("runtime_arguments"))
    rest = _argument_values(package.get("packageArguments") or package.get("package_arguments"))
    if kind == "oci" and runner == "docker":
        image = f"{identifier}:{version}" if version and ":" not in identifier else identifier
        passed = [item for name in allowed for item in ("-e", name)]
        return StdioTarget("docker", ("run", "--rm", "-i", *passed, *runtime, image, *rest), allowed, spec.cwd)
    pinned = {"pypi": f"{identifier}=={version}", "npm": f"{identifier}@{version}"}.get(str(kind), identifier) \
        if version else identifier
    npx_yes = ("-y",) if runner == "npx" and "-y" not in runtime and "--yes" not in runtime else ()
    return StdioTarget(runner, (*npx_yes, *runtime, pinned, *rest), allowed, spec.cwd)


def _remote_target(server: str, remote: dict[str, Any], spec: ServerSpec) -> HttpTarget:
    kind = remote.get("type") or remote.get("transport_type")
    url = remote.get("url")
    if kind != "streamable-http":
        raise GatewayError(f"server '{server}': its remote speaks {kind!r}; the gateway speaks streamable HTTP",
                           code="NoConnection", status=503, hint="give url = \"...\" of a streamable-HTTP endpoint")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")) or "{" in url:
        raise GatewayError(f"server '{server}': its remote has no usable URL ({str(url)[:100]!r})",
                           code="NoConnection", status=503, hint="give url = \"...\" in the gateway file")
    return HttpTarget(url, tuple(spec.headers.items()))


def registry_target(server: str, spec: ServerSpec, service: Service | None) -> tuple[Target, str]:
    """The target for a `registry = true` server from its registered server.json, and where it came from."""
    if service is None or service.type != "mcp_server":
        raise GatewayError(f"server '{server}': registry = true, but the registry holds no MCP server (server.json) "
                           "with that id", code="NoConnection", status=503,
                           hint="ingest its server.json (a2x-local ingest FILE), or give command/url in the gateway "
                                "file")
    packages = [p for p in service.metadata.get("packages") or [] if isinstance(p, dict)]
    remotes = [r for r in service.metadata.get("remotes") or [] if isinstance(r, dict)]
    if spec.command is not None:     # the owner's command, with the package's declared variables allowed
        return StdioTarget(spec.command, tuple(spec.args), tuple(spec.env), spec.cwd), "gateway file (command)"
    if spec.url is not None:
        return HttpTarget(spec.url, tuple(spec.headers.items())), "gateway file (url)"
    if spec.remote is not None or (spec.package is None and remotes and not packages):
        index = spec.remote or 0
        if index >= len(remotes):
            raise GatewayError(f"server '{server}': its server.json has {len(remotes)} remotes, no remote {index}",
                               code="NoConnection", status=503, hint="pick an existing remote = N")
        return _remote_target(server, remotes[index], spec), f"server.json remotes[{index}]"
    index = spec.package or 0
    if index >= len(packages):
        raise GatewayError(f"server '{server}': its server.json has no packages[{index}] (and "
                           f"{len(remotes)} remotes)", code="NoConnection", status=503,
                           hint="give command = \"...\" or url = \"...\" in the gateway file")
    return _package_target(server, packages[index], spec), f"server.json packages[{index}]"


def resolve_servers(file: GatewayFile, services: dict[str, Service]) -> tuple[dict[str, ServerEntry],
                                                                              dict[str, GatewayError]]:
    """Every server of the file resolved against the registry: (those reachable, why the others are not)."""
    entries: dict[str, ServerEntry] = {}
    problems: dict[str, GatewayError] = {}
    for name, spec in file.servers.items():
        try:
            if spec.registry:
                target, origin = registry_target(name, spec, services.get(name))
            elif spec.command is not None:
                target, origin = StdioTarget(spec.command, tuple(spec.args), tuple(spec.env), spec.cwd), "gateway file"
            else:
                assert spec.url is not None
                target, origin = HttpTarget(spec.url, tuple(spec.headers.items())), "gateway file"
        except GatewayError as exc:
            problems[name] = exc
            continue
        entries[name] = ServerEntry(name, target, spec.max_sessions, spec.start_timeout_s, spec.call_timeout_s,
                                    origin)
    return entries, problems
