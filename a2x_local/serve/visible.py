"""Answers with bidirectional controls made visible: a right-to-left override in a service's name (U+202E before
``gnp.exe`` makes ``safe-tool…gnp.exe`` show as "safe-toolexe.png") must not disguise anything on the page, in an MCP
client or in a terminal that prints the JSON.

The controls are written ``<U+202E>`` in every string of an answer. In JSON they can only stand inside strings, so
the serialized text is rewritten as a whole; ids never hold them (ingest refuses them in ids), so every id in an
answer still names its service exactly.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from fastapi.responses import JSONResponse
from pydantic import BaseModel

from a2x_local.text import show_bidi

M = TypeVar("M", bound=BaseModel)


class VisibleJSONResponse(JSONResponse):
    """The HTTP API's answers: JSON as FastAPI writes it, bidi controls shown as ``<U+202E>``."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
        return show_bidi(text).encode("utf-8")


def visible(model: M) -> M:
    """An MCP tool's answer with bidi controls shown as ``<U+202E>`` (the same model, every string rewritten)."""
    return type(model).model_validate_json(show_bidi(model.model_dump_json()))
