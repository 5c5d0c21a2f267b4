"""Generic JSONL or CSV with id, name and description columns (optional type; other columns go to metadata)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from a2x_local.errors import InputError
from a2x_local.jsonfiles import parse_json, read_text
from a2x_local.registry.formats._common import EntryReader, Limits
from a2x_local.registry.types import Service

REQUIRED_COLUMNS = ("id", "name", "description")
CSV_HINT = ("a CSV file needs a header with id, name and description (type, source, metadata optional) and one row"
            " per service; JSONL: one such object per line")


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
    for number, line in enumerate(read_text(path, limits).splitlines(), start=1):
        if not line.strip():
            continue
        row = parse_json(line, limits, str(path), entry=f"line {number}")
        reader = EntryReader(path, f"line {number}", row, limits)
        services.append(_service(reader, row))
    if not services:
        raise InputError(str(path), "contains no services", hint=CSV_HINT)
    return services


def _field_limit(limits: Limits) -> int:
    """The csv module refuses fields over 128 KiB by default; a metadata column may hold up to the metadata cap."""
    return max(csv.field_size_limit(), limits.max_metadata_bytes + 1024, 4 * limits.max_description_chars)


def parse_csv(path: Path, limits: Limits) -> list[Service]:
    # The limit is process-wide in the csv module; it only ever grows to what the registry limits allow.
    csv.field_size_limit(_field_limit(limits))
    rows = csv.DictReader(io.StringIO(read_text(path, limits), newline=""))
    try:
        return _csv_services(path, rows, limits)
    except csv.Error as exc:
        raise InputError(str(path), f"malformed CSV: {exc}", entry=f"line {rows.line_num}",
                         hint="a field larger than [registry] max_metadata_bytes is refused") from exc


def _csv_services(path: Path, rows: csv.DictReader, limits: Limits) -> list[Service]:
    header = rows.fieldnames or []
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InputError(str(path), f"the header lacks column(s) {', '.join(missing)} "
                                    f"(needs {', '.join(REQUIRED_COLUMNS)})", entry="header", hint=CSV_HINT)
    services = []
    for row in rows:
        number = rows.line_num
        if None in row:
            raise InputError(str(path), f"has {len(header) + len(row[None])} values for {len(header)} columns",
                             entry=f"line {number}", hint=CSV_HINT)
        values: dict[str, Any] = {k: v for k, v in row.items() if (v is not None and v != "") or k in REQUIRED_COLUMNS}
        if values.get("metadata"):
            values["metadata"] = parse_json(values["metadata"], limits, str(path), entry=f"line {number}",
                                            field="metadata")
        reader = EntryReader(path, f"line {number}", values, limits)
        services.append(_service(reader, values))
    if not services:
        raise InputError(str(path), "has a header but no rows", hint=CSV_HINT)
    return services
