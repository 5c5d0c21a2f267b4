"""The gateway file: which MCP servers the gateway may connect to and how, and the profiles that decide what each
client sees and may call. The registry owner writes it (TOML); it is validated whole, and every problem names the
file, the server or profile, and the field.

```toml
[servers.clock]                       # tools become services clock/<tool>
command = "/opt/a2x-local/.venv/bin/mcp-server-time"
args = ["--local-timezone", "UTC"]
env = ["TZ"]                          # names of variables passed on from the gateway's environment

[servers.notes]
url = "http://127.0.0.1:9100/mcp"
headers = { Authorization = { env = "NOTES_TOKEN", prefix = "Bearer " } }

[servers."io.github.example/weather"]
registry = true                       # how to reach it: the registered server.json's packages / remotes

[profiles.ops]
tokens = [{ env = "A2X_OPS_TOKEN" }]
call = ["clock/*"]
```

Nothing is read from a server's description that the owner did not ask for: a server.json's package or remote is
used only for a server listed here with `registry = true`, and only the environment variables listed under `env`
reach a server's process (never a shell).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from a2x_local.gateway.errors import GatewayFileError
from a2x_local.jsonfiles import read_bytes
from a2x_local.text import id_problem

FILE_MAX_BYTES = 1 << 20
FILE_HINT = "fix the gateway file (docs/gateway.md describes every field), then run `a2x-local gateway show`"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Secret(_Strict):
    """A value that never sits in the gateway file or the registry: read from an environment variable or a file
    when it is needed (a header value, a client token). ``prefix`` goes before it ("Bearer ")."""

    env: Annotated[str, Field(pattern=ENV_NAME)] | None = None
    file: str | None = None
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    prefix: str = ""

    @model_validator(mode="after")
    def _one_source(self) -> Secret:
        if sum(value is not None for value in (self.env, self.file, self.sha256)) != 1:
            raise ValueError("give exactly one of env = \"NAME\", file = \"PATH\" (sha256 = \"HEX\" for tokens)")
        return self


class ServerSpec(_Strict):
    """How to reach one MCP server: a command (stdio), a URL (streamable HTTP), or `registry = true` (from its
    registered server.json; `command`/`args` may still override the package's)."""

    command: Annotated[str, Field(min_length=1)] | None = None
    args: list[str] = Field(default_factory=list)
    env: list[Annotated[str, Field(pattern=ENV_NAME)]] = Field(default_factory=list)
    cwd: str | None = None
    url: Annotated[str, Field(pattern=r"^https?://")] | None = None
    headers: dict[Annotated[str, Field(pattern=HEADER_NAME)], Secret] = Field(default_factory=dict)
    registry: bool = False
    package: Annotated[int, Field(ge=0)] | None = None
    remote: Annotated[int, Field(ge=0)] | None = None
    max_sessions: Annotated[int, Field(ge=1)] | None = None
    start_timeout_s: Annotated[float, Field(gt=0)] | None = None
    call_timeout_s: Annotated[float, Field(gt=0)] | None = None

    @model_validator(mode="after")
    def _one_way(self) -> ServerSpec:
        if self.command is not None and self.url is not None:
            raise ValueError("give either command (a stdio server) or url (streamable HTTP), not both")
        if not self.registry and self.command is None and self.url is None:
            raise ValueError("say how to reach it: command = \"...\" (stdio), url = \"http://...\" (streamable "
                             "HTTP), or registry = true (its registered server.json's packages or remotes)")
        if self.url is not None and (self.args or self.cwd):
            raise ValueError("args and cwd are for a command; a url server takes headers")
        if self.package is not None and self.remote is not None:
            raise ValueError("give package or remote, not both")
        if (self.package is not None or self.remote is not None) and not self.registry:
            raise ValueError("package and remote pick an entry of the registered server.json: set registry = true")
        return self

    @field_validator("args")
    @classmethod
    def _no_nul(cls, value: list[str]) -> list[str]:
        if any("\x00" in arg for arg in value):
            raise ValueError("an argument holds a NUL character")
        return value


class ProfileSpec(_Strict):
    """What one kind of client may do: `see` (searches, listings, the tree, plans) and `call` by service-id glob;
    `deny` wins over both. `tokens` bind clients to it; `descriptions` replace a tool's description for them."""

    tokens: list[Secret] = Field(default_factory=list)
    see: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=lambda: ["*"])
    call: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    deny: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    descriptions: dict[str, Annotated[str, Field(min_length=1, max_length=4000)]] = Field(default_factory=dict)

    @field_validator("tokens")
    @classmethod
    def _no_prefix(cls, value: list[Secret]) -> list[Secret]:
        if any(token.prefix for token in value):
            raise ValueError("a token takes no prefix (clients send 'Authorization: Bearer TOKEN')")
        return value


class GatewayFile(_Strict):
    """The whole file; ``path`` is where it was read from (set by `load_gateway_file`)."""

    servers: dict[str, ServerSpec] = Field(default_factory=dict)
    profiles: dict[str, ProfileSpec] = Field(default_factory=dict)
    path: str = ""

    @field_validator("servers")
    @classmethod
    def _server_names(cls, value: dict[str, ServerSpec]) -> dict[str, ServerSpec]:
        for name in value:
            problem = id_problem(name)
            if problem:
                raise ValueError(f"server name {name[:80]!r}: {problem}")
        return value

    @field_validator("profiles")
    @classmethod
    def _default_has_no_token(cls, value: dict[str, ProfileSpec]) -> dict[str, ProfileSpec]:
        default = value.get("default")
        if default is not None and default.tokens:
            raise ValueError("profile 'default' is for clients without a token: it takes no tokens")
        return value


def _where(loc: tuple[Any, ...]) -> tuple[str | None, str | None]:
    """(entry, field) of a validation error's location: ('servers.clock', 'headers.Authorization.env')."""
    parts = [str(part) for part in loc]
    if len(parts) >= 2 and parts[0] in ("servers", "profiles"):
        return f"{parts[0]}.{parts[1]}", ".".join(parts[2:]) or None
    return None, ".".join(parts) or None


def parse_gateway_file(path: Path, data: dict[str, Any]) -> GatewayFile:
    """The validated file; the first problem raises `GatewayFileError` naming the file, the entry and the field."""
    try:
        return GatewayFile.model_validate({**data, "path": str(path)})
    except ValidationError as exc:
        error = exc.errors()[0]
        entry, field = _where(tuple(error["loc"]))
        where = [str(path)] + ([entry] if entry else []) + ([f"field '{field}'"] if field else [])
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "is not a gateway file field"
        more = f" (and {len(exc.errors()) - 1} more problems)" if len(exc.errors()) > 1 else ""
        raise GatewayFileError(f"{': '.join(where)}: {message}{more}", hint=FILE_HINT) from None


def load_gateway_file(path: Path) -> GatewayFile:
    """Read and validate a gateway file (a regular file, bounded, UTF-8 TOML)."""
    if not path.is_file():
        raise GatewayFileError(f"{path}: no gateway file here",
                               hint="write one (docs/gateway.md), or point --gateway / [gateway] file at it")
    raw = read_bytes(path, FILE_MAX_BYTES, what="gateway", hint="give the gateway file's path, not a folder's")
    try:
        data = tomllib.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise GatewayFileError(f"{path}: not UTF-8 text (byte {exc.start})", hint="save the file as UTF-8") from exc
    except tomllib.TOMLDecodeError as exc:
        raise GatewayFileError(f"{path}: not valid TOML: {exc}", hint=FILE_HINT) from exc
    return parse_gateway_file(path, data)
