"""Reading input files and checking entries, so every format reports bad input the same way."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from a2x_local.errors import InputError
from a2x_local.registry.config import RegistryConfig
from a2x_local.registry.types import SERVICE_TYPES, Service


@dataclass(frozen=True)
class Limits:
    """Size limits on what a service may carry (from the [registry] config section)."""

    max_description_chars: int
    max_name_chars: int

    @classmethod
    def from_config(cls, config: RegistryConfig) -> Limits:
        return cls(max_description_chars=config.max_description_chars, max_name_chars=config.max_name_chars)

    @classmethod
    def defaults(cls) -> Limits:
        return cls.from_config(RegistryConfig.defaults())


def read_text(path: Path) -> str:
    """The file's text: must be readable, non-empty UTF-8 (a BOM is accepted)."""
    shown = str(path)
    try:
        data = path.read_bytes()
    except IsADirectoryError as exc:
        raise InputError(shown, "is a folder where a file was expected") from exc
    except FileNotFoundError as exc:
        raise InputError(shown, "file not found") from exc
    except OSError as exc:
        raise InputError(shown, f"cannot read file: {exc.strerror or exc}") from exc
    if not data.strip():
        raise InputError(shown, "file is empty")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(shown, f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} "
                                f"(line {line})", hint="convert the file to UTF-8") from exc


def load_json(path: Path, text: str | None = None) -> Any:
    """Parse a JSON file, reporting syntax errors with line and column."""
    text = read_text(path) if text is None else text
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(str(path), f"malformed JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from exc


class EntryReader:
    """Typed access to one entry's fields; every failure names the file, the entry and the field."""

    def __init__(self, file: Path, entry: str | int, data: Any, limits: Limits) -> None:
        self.file = str(file)
        self.source = _resolved(self.file)
        self.entry = entry
        self.limits = limits
        if not isinstance(data, dict):
            self.fail(f"must be an object, got {json_type(data)}")
        self.data: dict[str, Any] = data

    def fail(self, message: str, field: str | None = None) -> None:
        raise InputError(self.file, message, entry=self.entry, field=field)

    def text(self, field: str, *, required: bool = True, default: str | None = None) -> str | None:
        """A string field; required ones must be present and not blank."""
        if field not in self.data or self.data[field] is None:
            if required:
                self.fail("is missing", field)
            return default
        value = self.data[field]
        if not isinstance(value, str):
            self.fail(f"must be a string, got {json_type(value)}", field)
        if required and not value.strip():
            self.fail("is empty", field)
        return value

    def mapping(self, field: str) -> dict[str, Any]:
        value = self.data.get(field)
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(f"must be an object, got {json_type(value)}", field)
        return value

    def items(self, field: str) -> list[Any]:
        value = self.data.get(field)
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(f"must be an array, got {json_type(value)}", field)
        return value

    def service(self, *, id: str, type: str, name: str, description: str, metadata: dict[str, Any],
                id_field: str = "id", name_field: str = "name",
                description_field: str = "description") -> Service:
        """Check the common rules (known type, sizes) and make the Service."""
        if type not in SERVICE_TYPES:
            self.fail(f"unknown service type {type!r}; expected one of {', '.join(SERVICE_TYPES)}", "type")
        if not id.strip():
            self.fail("is empty", id_field)
        if len(id) > 500 or any(ch in id for ch in "\n\r\t"):
            self.fail("must be a single line of at most 500 characters", id_field)
        name, description = name.strip(), description.strip()
        if not name:
            self.fail("is empty", name_field)
        if not description:
            self.fail("is empty", description_field)
        if len(name) > self.limits.max_name_chars:
            self.fail(f"is {len(name):,} characters, over the limit of {self.limits.max_name_chars:,}", name_field)
        if len(description) > self.limits.max_description_chars:
            self.fail(f"is {len(description):,} characters, over the limit of "
                      f"{self.limits.max_description_chars:,} (raise [registry] max_description_chars to accept it)",
                      description_field)
        return Service(id=id.strip(), type=type, name=name, description=description, metadata=metadata,
                       source=self.source)


@lru_cache(maxsize=256)
def _resolved(path: str) -> str:
    """Absolute source path, resolved once per file rather than once per entry."""
    return str(Path(path).resolve())


def json_type(value: Any) -> str:
    """JSON's name for a Python value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def slug(text: str) -> str:
    """lower-case-words-with-dashes, for ids derived from names."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unnamed"
