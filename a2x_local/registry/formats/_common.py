"""Reading input files and checking entries, so every format reports bad input the same way."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from a2x_local.errors import InputError
from a2x_local.jsonfiles import JsonLimits, check_depth
from a2x_local.registry.config import RegistryConfig
from a2x_local.registry.types import SERVICE_TYPES, Service, canonical_json
from a2x_local.text import id_problem, text_problem

# What to do about a file or an entry that a format cannot read (nothing is written: an ingest is all or nothing).
FORMAT_HINT = ("docs/registry.md (The six formats) shows what each format holds; `--format` names the format when"
               " the guess from the file is wrong")
ENTRY_HINT = "fix that entry and ingest again (nothing was written); docs/registry.md describes each format's fields"


@dataclass(frozen=True)
class Limits(JsonLimits):
    """Size limits on what a service and an input file may carry (from the [registry] config section); the file's
    size and nesting are the core JSON reader's limits."""

    max_description_chars: int
    max_name_chars: int
    max_metadata_bytes: int

    @classmethod
    def from_config(cls, config: RegistryConfig) -> Limits:
        return cls(max_description_chars=config.max_description_chars, max_name_chars=config.max_name_chars,
                   max_metadata_bytes=config.max_metadata_bytes, max_file_bytes=config.max_file_bytes,
                   max_json_depth=config.max_json_depth)

    @classmethod
    def defaults(cls) -> Limits:
        return cls.from_config(RegistryConfig.defaults())


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
        raise InputError(self.file, message, entry=self.entry, field=field, hint=ENTRY_HINT)

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
        """Check the common rules (known type, sizes, printable text, bounded metadata) and make the Service."""
        if type not in SERVICE_TYPES:
            self.fail(f"unknown service type {type!r}; expected one of {', '.join(SERVICE_TYPES)}", "type")
        if not id.strip():
            self.fail("is empty", id_field)
        if len(id) > 500 or any(ch in id for ch in "\n\r\t"):
            self.fail("must be a single line of at most 500 characters", id_field)
        name, description = name.strip(), description.strip()
        problem = id_problem(id)
        if problem:
            self.fail(problem, id_field)
        for field, value, multiline in ((name_field, name, False), (description_field, description, True)):
            problem = text_problem(value, multiline=multiline)
            if problem:
                self.fail(problem, field)
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
        self._check_metadata(metadata)
        return Service(id=id.strip(), type=type, name=name, description=description, metadata=metadata,
                       source=self.source)

    def _check_metadata(self, metadata: dict[str, Any]) -> None:
        """Bounded depth and size, and text that encodes (a lone surrogate would fail only when written)."""
        check_depth(metadata, self.limits.max_json_depth, self.file, entry=str(self.entry), field="metadata")
        try:
            size = len(canonical_json(metadata).encode("utf-8"))
        except UnicodeEncodeError as exc:
            self.fail(f"contains an unpaired surrogate U+{ord(exc.object[exc.start]):04X} (not valid Unicode)",
                      "metadata")
        if size > self.limits.max_metadata_bytes:
            self.fail(f"is {size:,} bytes of JSON, over the limit of {self.limits.max_metadata_bytes:,} (raise "
                      "[registry] max_metadata_bytes to accept it)", "metadata")


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
