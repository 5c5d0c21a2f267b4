"""Errors a client of the server gets: each one an HTTP status, a code, a message and a hint, never a traceback."""

from __future__ import annotations

from a2x_local.errors import A2XError, DatabaseBusyError, UserError
from a2x_local.gateway import GatewayError


class ServeError(A2XError):
    """An answer the client's request cannot get; ``status`` is its HTTP status."""

    status = 400


class BadRequest(ServeError):
    pass


class NotFound(ServeError):
    status = 404


class ModelCallFailed(ServeError):
    """The model calls of one search failed (that search only; the others in its batch are answered)."""

    status = 502


class Unavailable(ServeError):
    """The server cannot answer this now: no model loaded, no usable tree, the registry busy."""

    status = 503


class TimedOut(ServeError):
    status = 504


def status_of(error: A2XError) -> int:
    """The HTTP status of any a2x-local error: a busy database is temporary (503), other user errors are 400."""
    if isinstance(error, ServeError):
        return error.status
    if isinstance(error, GatewayError):
        return error.status
    if isinstance(error, DatabaseBusyError):
        return 503
    return 400 if isinstance(error, UserError) else 500
