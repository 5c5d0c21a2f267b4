"""Cursor paging for every list the server returns (search hits, a category's children and services, the service
listing): a page of at most ``limit`` entries and a ``next_cursor`` that fetches the next one.

A cursor is opaque to clients: the offset of the next page and a short digest of what it pages (the request's
parameters and the registry snapshot it was made on). A cursor given to another request, or kept across a registry
change, is refused with one error (`BadCursor`) instead of silently paging something else.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from a2x_local.serve.errors import BadRequest

T = TypeVar("T")
_MAX_CURSOR_CHARS = 200


def scope_of(*parts: object) -> str:
    """A short digest of what a cursor pages: the kind of list, its parameters and the snapshot's identity."""
    return hashlib.sha256(json.dumps([str(part) for part in parts]).encode()).hexdigest()[:16]


def encode_cursor(offset: int, scope: str) -> str:
    raw = json.dumps({"o": offset, "s": scope}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None, scope: str) -> int:
    """The offset a cursor points at (0 without one); a cursor of another request or registry is refused."""
    if not cursor:
        return 0
    try:
        if len(cursor) > _MAX_CURSOR_CHARS:
            raise ValueError("too long")
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset, made_for = int(data["o"]), str(data["s"])
        if offset < 0:
            raise ValueError("negative offset")
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
        raise BadRequest("the cursor is not one this server gave out", code="BadCursor",
                         hint="pass next_cursor from the previous answer unchanged, or leave it out") from None
    if made_for != scope:
        raise BadRequest("the cursor belongs to another request, or the registry changed since it was given",
                         code="BadCursor", hint="repeat the request without a cursor to start again")
    return offset


@dataclass(frozen=True)
class Page:
    """Where a page starts and how long it is; ``slice`` cuts it out of a list and says whether more follow."""

    offset: int
    limit: int
    scope: str

    @classmethod
    def of(cls, cursor: str | None, limit: int, scope: str) -> Page:
        return cls(decode_cursor(cursor, scope), limit, scope)

    @property
    def end(self) -> int:
        return self.offset + self.limit

    def next_cursor(self, total: int) -> str | None:
        return encode_cursor(self.end, self.scope) if total > self.end else None

    def slice(self, items: Sequence[T]) -> tuple[list[T], str | None]:
        return list(items[self.offset:self.end]), self.next_cursor(len(items))
