"""Integers too long to convert, and where they lie in JSON or TOML text, so that the error names the place.

Python converts at most `sys.int_info.default_max_str_digits` (4,300) digits of text to an int and raises a bare
ValueError past that (the limit keeps a quadratic conversion from tying a process up). No number a2x-local reads
needs that many digits, so such a value is refused like any other malformed input: naming the file, the key path
(JSON) or the line, column and key (TOML). Only the error path comes here: reading never slows down.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

# One integer as JSON or TOML writes it: not part of a word, a string's start, a hex number or a float (TOML
# allows 1_000).
_INTEGER = re.compile(r"(?<![\w.\"'])[-+]?\d[\d_]*(?![\d_.eE])")
_TOML_KEY = re.compile(r"[ \t]*([A-Za-z0-9_.\"' -]{1,80}?)[ \t]*=")
_TOML_TABLE = re.compile(r"(?m)^[ \t]*\[{1,2}([^\]\n]{1,80})\]{1,2}")
HINT = "write the number it stands for (a size, a count, a limit) in ordinary digits"


def max_digits() -> int:
    """The most digits Python converts to an int here (4,300 unless the process changed it)."""
    return sys.get_int_max_str_digits() or sys.int_info.default_max_str_digits


def too_long(message: str) -> bool:
    """Whether a ValueError's message is Python's digit limit (not some other ValueError)."""
    return "digits" in message and "limit" in message.lower()


class _Long:
    """Stands for an over-long integer while JSON is read again to find where it lies."""


def json_path(text: str) -> str | None:
    """The key path (`[0].metadata.n`) of the first over-long integer of JSON text, found by reading it again with
    such integers kept as markers; None when the text fails for another reason first."""
    marker, limit = _Long(), max_digits()

    def integer(digits: str) -> Any:
        return marker if len(digits.lstrip("-")) > limit else int(digits)

    try:
        value = json.loads(text, parse_int=integer)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if node is marker:
            return path.lstrip(".") or "$"
        if isinstance(node, dict):
            stack.extend((child, f"{path}.{str(key)[:80]}") for key, child in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((child, f"{path}[{index}]") for index, child in reversed(list(enumerate(node))))
    return None


def first_long_integer(text: str) -> int | None:
    """Where the first integer of more than `max_digits` digits starts (one pass: each run is tried once)."""
    limit = max_digits()
    for found in _INTEGER.finditer(text):
        run = found.group()
        if len(run) > limit and sum(char.isdigit() for char in run) > limit:
            return found.start()
    return None


def place(text: str) -> str:
    """` at line N, column M` of the first over-long integer of ``text``, or nothing when none is found."""
    offset = first_long_integer(text)
    if offset is None:
        return ""
    row, line_start = text.count("\n", 0, offset) + 1, text.rfind("\n", 0, offset) + 1
    return f" at line {row}, column {offset - line_start + 1}"


def toml_place(text: str) -> str:
    """`[table] key at line N, column M` for the first over-long integer of TOML text (what of it can be told)."""
    offset = first_long_integer(text)
    if offset is None:
        return ""
    line_start = text.rfind("\n", 0, offset) + 1
    key = _TOML_KEY.match(text, line_start, offset)
    tables = _TOML_TABLE.findall(text, 0, line_start)
    named = " ".join(part for part in (f"[{tables[-1].strip()}]" if tables else "",
                                       key.group(1).strip() if key else "") if part)
    return f"{named}{place(text)}".strip()
