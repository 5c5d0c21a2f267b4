"""Errors of a call through the gateway. Each names the server (and the service) it is about, carries the HTTP
status the API answers it with, and the outcome its audit row records."""

from __future__ import annotations

from a2x_local.errors import A2XError, UserError


class GatewayError(A2XError):
    """A call that could not be made or did not finish: ``status`` is its HTTP status, ``outcome`` its audit
    outcome (denied, invalid, too_large, failed, timeout, busy, cancelled)."""

    status = 502
    outcome = "failed"

    def __init__(self, message: str, *, hint: str | None = None, code: str | None = None,
                 status: int | None = None, outcome: str | None = None) -> None:
        super().__init__(message, hint=hint, code=code)
        if status is not None:
            self.status = status
        if outcome is not None:
            self.outcome = outcome


def denied(service_id: str, profile: str) -> GatewayError:
    return GatewayError(f"service '{service_id[:200]}' may not be called by profile '{profile}'", code="NotCallable",
                        status=403, outcome="denied",
                        hint="the registry owner allows calls in the gateway file ([profiles.NAME] call = [...]); "
                             "send the token of a profile that may call it")


class GatewayFileError(UserError):
    """The gateway file is missing, unreadable or invalid (named with the server or profile and the field)."""
