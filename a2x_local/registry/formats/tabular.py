"""Generic JSONL or CSV with id, name and description columns (optional type; other columns go to metadata)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from a2x_local.errors import InputError
from a2x_local.registry.formats._common import EntryReader, Limits, read_text
from a2x_local.registry.types import Service

REQUIRED_COLUMNS = ("id", "name", "description")


def _service(reader: EntryReader, row: dict[str, Any]) -> Service:
    service_id = reader.text("id")
    reader.entry = f"{reader.entry} (id {service_id!r})"
    metadata = reader.mapping("metadata")
    extra = {k: v for k, v in row.items() if k not in {"id", "type", "name", "description", "metadata", "source"}}
    return reader.service(id=service_id, type=reader.text("type", required=False, default="generic"),
                          name=reader.text("name"), description=reader.text("description"),
                          metadata={**extra, **metadata})


def parse_jsonl(path: Path, limits: Limits) -> list[Service]:
    services = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(str(path), f"malformed JSON: {exc.msg} at column {exc.colno}",
                             entry=f"line {number}") from exc
        reader = EntryReader(path, f"line {number}", row, limits)
        services.append(_service(reader, row))
    if not services:
        raise InputError(str(path), "contains no services")
    return services


def parse_csv(path: Path, limits: Limits) -> list[Service]:
    rows = csv.DictReader(io.StringIO(read_text(path), newline=""))
    header = rows.fieldnames or []
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InputError(str(path), f"the header lacks column(s) {', '.join(missing)} "
                                    f"(needs {', '.join(REQUIRED_COLUMNS)})", entry="header")
    services = []
    for row in rows:
        number = rows.line_num
        if None in row:
            raise InputError(str(path), f"has {len(header) + len(row[None])} values for {len(header)} columns",
                             entry=f"line {number}")
        values: dict[str, Any] = {k: v for k, v in row.items() if (v is not None and v != "") or k in REQUIRED_COLUMNS}
        if values.get("metadata"):
            try:
                values["metadata"] = json.loads(values["metadata"])
            except json.JSONDecodeError as exc:
                raise InputError(str(path), f"is not valid JSON: {exc.msg}", entry=f"line {number}",
                                 field="metadata") from exc
        reader = EntryReader(path, f"line {number}", values, limits)
        services.append(_service(reader, values))
    if not services:
        raise InputError(str(path), "has a header but no rows")
    return services
