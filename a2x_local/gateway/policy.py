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
# The profile an audit row names for a client no profile is bound to (a token the gateway file does not know).
NO_PROFILE = "(none)"


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
    token_sha256: str | None = field(default=None, compare=False, repr=False)   # to find its profile again

    @staticmethod
    def key_of(token: str | None, anonymous: str = "anonymous") -> str:
        """How the audit and the activations name a client: "token:" and 8 hex digits of its token's digest."""
        return f"token:{token_digest(token)[:8]}" if token else anonymous

    @classmethod
    def unbound(cls, key: str) -> Caller:
        """A client whose token no profile knows: sees nothing, calls nothing."""
        return cls(Profile(NO_PROFILE, see=()), key)


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
        return self._bound(token_digest(token))

    def _bound(self, digest: str) -> Caller | None:
        for known, name in self._tokens.items():
            if hmac.compare_digest(known, digest):
                return Caller(self.profiles[name], f"token:{digest[:8]}", digest)
        return None

    def again(self, caller: Caller) -> Caller | None:
        """The same client under these profiles (a gateway file read again): its token's profile now, None when the
        token is bound to none any more; a client without a token gets the default profile."""
        if caller.token_sha256 is None:
            return Caller(self.default(), caller.key)
        found = self._bound(caller.token_sha256)
        return Caller(found.profile, caller.key, caller.token_sha256) if found is not None else None
