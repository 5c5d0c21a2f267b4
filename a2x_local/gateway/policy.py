"""Who may see and call what: profiles bound to client tokens, deny by default.

A profile sees the services its `see` globs match and calls those its `call` globs match (and it sees); `deny`
wins over both, so a denied tool is neither listed nor callable. The default profile (clients without a token:
loopback only, or holders of the server's own --token) sees everything and calls nothing unless the gateway file
says otherwise. Tokens are kept only as SHA-256 digests; a token in no profile is refused, never downgraded.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
from dataclasses import dataclass, field

from a2x_local.gateway.connections import read_secret
from a2x_local.gateway.errors import GatewayError, GatewayFileError
from a2x_local.gateway.spec import GatewayFile

DEFAULT_PROFILE = "default"


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _matches(service_id: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(service_id, pattern) for pattern in patterns)


@dataclass(frozen=True)
class Profile:
    """What one kind of client may do (see the module docstring)."""

    name: str
    see: tuple[str, ...] = ("*",)
    call: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    descriptions: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def may_see(self, service_id: str) -> bool:
        return not _matches(service_id, self.deny) and _matches(service_id, self.see)

    def may_call(self, service_id: str) -> bool:
        return self.may_see(service_id) and _matches(service_id, self.call)

    def description(self, service_id: str, default: str) -> str:
        return self.descriptions.get(service_id, default)


@dataclass(frozen=True)
class Caller:
    """One client of a call: its profile and a key that tells clients apart (for its activated tools and the
    audit): "stdio" for the process's one client, "token:1a2b3c4d" (the start of its token's digest), "anonymous"."""

    profile: Profile
    key: str


class Policy:
    """The profiles of a gateway file, and the digests of their tokens."""

    def __init__(self, profiles: dict[str, Profile], tokens: dict[str, str]) -> None:
        self.profiles = profiles
        self._tokens = tokens      # digest -> profile name

    @classmethod
    def closed(cls) -> Policy:
        """No gateway file: the default profile only (sees everything, calls nothing)."""
        return cls({DEFAULT_PROFILE: Profile(DEFAULT_PROFILE)}, {})

    @classmethod
    def from_file(cls, file: GatewayFile) -> Policy:
        """The file's profiles, their tokens read now (a variable or file that is missing is an error naming the
        profile: a client could never be bound to it)."""
        profiles = {DEFAULT_PROFILE: Profile(DEFAULT_PROFILE)}
        tokens: dict[str, str] = {}
        for name, spec in file.profiles.items():
            profiles[name] = Profile(name, tuple(spec.see), tuple(spec.call), tuple(spec.deny),
                                     dict(spec.descriptions))
            for index, secret in enumerate(spec.tokens):
                where = f"{file.path}: profiles.{name}: field 'tokens.{index}'"
                if secret.sha256 is not None:
                    digest = secret.sha256
                else:
                    try:
                        digest = token_digest(read_secret(secret, where))
                    except GatewayError as exc:
                        raise GatewayFileError(exc.message, hint=exc.hint) from exc
                other = tokens.get(digest)
                if other is not None and other != name:
                    raise GatewayFileError(f"{where}: the same token is also bound to profile '{other}'",
                                           hint="give each profile its own tokens")
                tokens[digest] = name
        return cls(profiles, tokens)

    @property
    def has_tokens(self) -> bool:
        return bool(self._tokens)

    def default(self) -> Profile:
        return self.profiles[DEFAULT_PROFILE]

    def caller(self, token: str | None, *, anonymous: str = "anonymous") -> Caller | None:
        """The caller a token makes (None: a token bound to no profile). No token: the default profile."""
        if not token:
            return Caller(self.default(), anonymous)
        digest = token_digest(token)
        for known, name in self._tokens.items():
            if hmac.compare_digest(known, digest):
                return Caller(self.profiles[name], f"token:{digest[:8]}")
        return None
