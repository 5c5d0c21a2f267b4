"""Ingest: read every input completely, check it, then apply it to the registry in one transaction.

Nothing is written unless everything is valid: a bad entry anywhere, a duplicate id, or (without ``replace``) a
changed service, leaves the database exactly as it was.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from a2x_local.db import transaction
from a2x_local.errors import InputError, UserError
from a2x_local.registry.formats import Limits, Skipped, read_paths
from a2x_local.registry.store import Registry
from a2x_local.registry.types import Service, canonical_json
from a2x_local.text import identity_key, mixed_script


@dataclass
class FileSummary:
    path: str
    format: str
    services: int


@dataclass
class Change:
    """A service whose id exists with different content; ``fields`` names what differs."""

    id: str
    fields: list[str]


@dataclass
class Lookalike:
    """Two ids a person cannot tell apart (``why``: how they differ), let in with ``--allow-lookalikes``."""

    id: str
    other: str
    why: str


class LookalikeError(UserError):
    """An incoming id looks like another one (case, normalisation, invisible characters, mixed scripts)."""

    def __init__(self, found: Lookalike, where: str) -> None:
        super().__init__(f"id {found.id!r} ({where}) {found.why}; nothing was written",
                         hint="rename one of them; --allow-lookalikes (or [registry] allow_lookalikes) stores both",
                         code="LookalikeId")
        self.found = found


def change_lists(*, added: list[str], updated: list[Change], unchanged: int,
                 removed: list[str] | None = None) -> dict[str, Any]:
    """What an ingest or a sync changed, as both report it: each kind's count under its name (``added``), the ids
    under ``added_ids``, and each updated service's changed fields under ``updated_fields``."""
    return {
        "added": len(added), "updated": len(updated), "unchanged": unchanged,
        **({"removed": len(removed)} if removed is not None else {}),
        "added_ids": list(added), "updated_ids": [c.id for c in updated],
        "updated_fields": {c.id: c.fields for c in updated},
        **({"removed_ids": list(removed)} if removed is not None else {}),
    }


@dataclass
class IngestReport:
    files: list[FileSummary] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    updated: list[Change] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    conflicts: list[Change] = field(default_factory=list)
    run_id: int | None = None
    dry_run: bool = False
    skipped: list[Skipped] = field(default_factory=list)
    lookalikes: list[Lookalike] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": [f.__dict__ for f in self.files],
            "skipped": [s.__dict__ for s in self.skipped],
            "lookalikes": [s.__dict__ for s in self.lookalikes],
            **change_lists(added=self.added, updated=self.updated, unchanged=len(self.unchanged)),
            "conflicts": len(self.conflicts),
            "conflict_ids": [c.id for c in self.conflicts],
            "conflict_fields": {c.id: c.fields for c in self.conflicts},
            "run_id": self.run_id,
            "dry_run": self.dry_run,
        }


class ConflictError(UserError):
    """Changed services were found and ``replace`` was not given; carries the report for display."""

    def __init__(self, report: IngestReport) -> None:
        count = len(report.conflicts)
        shown = ", ".join(repr(c.id) for c in report.conflicts[:5]) + (" ..." if count > 5 else "")
        super().__init__(
            f"{count} service(s) already exist with different content ({shown}); nothing was ingested",
            hint="re-run with --replace to update them",
            code="IngestConflict",
        )
        self.report = report


def _changed_fields(old: Service, new: Service) -> list[str]:
    """What re-ingesting ``new`` over ``old`` would change (empty: nothing, the entry is unchanged)."""
    fields = [name for name in ("type", "name", "description") if getattr(old, name) != getattr(new, name)]
    if canonical_json(old.metadata) != canonical_json(new.metadata):
        fields.append("metadata")
    return fields


def collect(paths: Sequence[Path], fmt: str = "auto", limits: Limits | None = None, server: str | None = None,
            skipped: list[Skipped] | None = None) -> tuple[list[FileSummary], list[Service]]:
    """Read and check every input; duplicate ids anywhere in one ingest are an error. Entries of folders that were
    not read go to ``skipped``."""
    files, services, seen = [], [], {}
    for path, detected, group in read_paths(paths, fmt, limits, server, skipped):
        files.append(FileSummary(str(path), detected, len(group)))
        for service in group:
            if service.id in seen:
                raise InputError(str(path), f"duplicate id (first seen in {seen[service.id]})",
                                 entry=repr(service.id), field="id",
                                 hint="give every service its own id (the message names where each copy is)")
            seen[service.id] = service.source or str(path)
            services.append(service)
    return files, services


@dataclass
class Incoming:
    """Every input read and checked, and set against the registry: which services are new, which changed (and
    how), which are identical; all in input order."""

    files: list[FileSummary]
    services: list[Service]
    skipped: list[Skipped] = field(default_factory=list)
    lookalikes: list[Lookalike] = field(default_factory=list)
    new: list[Service] = field(default_factory=list)
    changed: list[Service] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def lookalikes(services: Sequence[Service], existing: Sequence[str] = (), *,
               allow: bool = False) -> list[Lookalike]:
    """Incoming ids that look like another incoming or ``existing`` id: equal after NFKC, case folding and removal
    of invisible characters (`identity_key`), or mixing Latin with Cyrillic or Greek letters. Refused with
    `LookalikeError` naming both, unless ``allow``: then returned, and both are stored."""
    found: list[Lookalike] = []
    by_key: dict[str, tuple[str, str]] = {}
    for service_id in existing:
        by_key.setdefault(identity_key(service_id), (service_id, "already in the registry"))
    for service in services:
        key = identity_key(service.id)
        where = f"{service.source or 'input'}"
        other = by_key.get(key)
        scripts = mixed_script(service.id)
        if other is not None and other[0] != service.id:
            look = Lookalike(service.id, other[0], f"looks like {other[0]!r} ({other[1]}): ids that differ only by"
                                                   " case, Unicode normalisation or invisible characters are one"
                                                   " name to a person")
        elif scripts:
            look = Lookalike(service.id, "", f"mixes {scripts} letters, a common disguise of another id")
        else:
            by_key.setdefault(key, (service.id, where))
            continue
        if not allow:
            raise LookalikeError(look, where)
        found.append(look)
        by_key.setdefault(key, (service.id, where))
    return found


def read_incoming(registry: Registry, paths: Sequence[Path], fmt: str = "auto", limits: Limits | None = None,
                  server: str | None = None, *, allow_lookalikes: bool = False, sync: bool = False) -> Incoming:
    """Read and check every input (`collect`), refuse lookalike ids (`lookalikes`: among the inputs, and for an
    ingest against the registry too; a sync replaces the registry), then compare each service with the one stored
    under its id.

    Shared by ingest and sync, which differ only in what they do with the changes and with what is missing."""
    if not paths:
        raise UserError("no input paths given",
                        hint="name the files or folders to read, e.g. a2x-local ingest data/sample")
    skipped: list[Skipped] = []
    files, services = collect(paths, fmt, limits, server, skipped)
    similar = lookalikes(services, () if sync else sorted(registry.ids()), allow=allow_lookalikes)
    existing = registry.get_many(s.id for s in services)
    incoming = Incoming(files=files, services=services, skipped=skipped, lookalikes=similar)
    for service in services:
        old = existing.get(service.id)
        if old is None:
            incoming.new.append(service)
            continue
        fields = _changed_fields(old, service)
        if fields:
            incoming.changes.append(Change(service.id, fields))
            incoming.changed.append(service)
        else:
            incoming.unchanged.append(service.id)
    return incoming


def ingest(con: duckdb.DuckDBPyConnection, paths: Sequence[Path], *, fmt: str = "auto", replace: bool = False,
           limits: Limits | None = None, server: str | None = None, dry_run: bool = False,
           allow_lookalikes: bool = False) -> IngestReport:
    """Add new services, update changed ones (only with ``replace``), skip identical ones; all or nothing."""
    started = datetime.now()
    registry = Registry(con)
    incoming = read_incoming(registry, paths, fmt, limits, server, allow_lookalikes=allow_lookalikes)
    report = IngestReport(files=incoming.files, added=[s.id for s in incoming.new], unchanged=incoming.unchanged,
                          dry_run=dry_run, skipped=incoming.skipped, lookalikes=incoming.lookalikes)
    (report.updated if replace else report.conflicts).extend(incoming.changes)
    if report.conflicts:
        raise ConflictError(report)
    if dry_run:
        return report
    report.run_id = write_incoming(con, registry, incoming, started=started, paths=paths, fmt=fmt, replace=replace)
    return report


def write_incoming(con: duckdb.DuckDBPyConnection, registry: Registry, incoming: Incoming, *, started: datetime,
                   paths: Sequence[Path], fmt: str, replace: bool, removed: Sequence[str] = (),
                   sync: bool = False) -> int:
    """Insert the new services, overwrite the changed ones (with ``replace``), delete ``removed`` and record the
    run, in one transaction; returns the run's id. Shared by ingest and sync so that both record runs alike."""
    with transaction(con):
        registry.insert(incoming.new)
        if replace:
            registry.update(incoming.changed)
        if removed:
            registry.remove(removed)
        row = con.execute(
            "INSERT INTO ingest_runs (started_at, finished_at, paths, format, replace, added, updated, unchanged,"
            " conflicts, status, removed, sync) VALUES (?, now(), ?, ?, ?, ?, ?, ?, 0, 'completed', ?, ?)"
            " RETURNING id",
            [started, json.dumps([str(p) for p in paths]), fmt, replace, len(incoming.new),
             len(incoming.changed) if replace else 0, len(incoming.unchanged), len(removed), sync],
        ).fetchone()
    return int(row[0])
