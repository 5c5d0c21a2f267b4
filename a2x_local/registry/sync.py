"""Sync: make the registry equal an export (add, update and remove), all or nothing, with a cap on removals.

A nightly export that arrives truncated (a failed download, a half-written file) would otherwise empty the
registry and every tree with it; so a sync that would remove more than a configured share of the services is
refused unless forced, and then nothing at all is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from a2x_local.errors import UserError
from a2x_local.registry.formats import Limits, Skipped
from a2x_local.registry.ingest import Change, FileSummary, Lookalike, change_lists, read_incoming, write_incoming
from a2x_local.registry.store import Registry


@dataclass
class SyncReport:
    """What a sync changed (or, refused or dry, would change)."""

    files: list[FileSummary] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    lookalikes: list[Lookalike] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    updated: list[Change] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    before: int = 0
    run_id: int | None = None
    dry_run: bool = False
    forced: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)

    @property
    def after(self) -> int:
        """Services the registry holds after the sync (would hold, when refused or dry)."""
        return self.before + len(self.added) - len(self.removed)

    @property
    def removed_share(self) -> float:
        return len(self.removed) / self.before if self.before else 0.0

    def counts(self) -> dict[str, int]:
        return {"added": len(self.added), "updated": len(self.updated), "removed": len(self.removed),
                "unchanged": self.unchanged}

    def to_dict(self) -> dict[str, Any]:
        return {
            "sync": True,
            "files": [f.__dict__ for f in self.files],
            "skipped": [s.__dict__ for s in self.skipped],
            "lookalikes": [s.__dict__ for s in self.lookalikes],
            **change_lists(added=self.added, updated=self.updated, unchanged=self.unchanged, removed=self.removed),
            "services_before": self.before,
            "services_after": self.after,
            "run_id": self.run_id,
            "dry_run": self.dry_run,
            "forced": self.forced,
        }


class SyncRefusedError(UserError):
    """The sync would remove more than the allowed share of the registry; carries the report for display."""

    def __init__(self, report: SyncReport, max_share: float) -> None:
        count = len(report.removed)
        super().__init__(
            f"the sync would remove {count:,} of {report.before:,} services ({report.removed_share:.0%}), more than"
            f" the allowed {max_share:.0%} ([registry] sync_max_remove_share); nothing was changed",
            hint="check that the export is complete; re-run with --force to remove them anyway",
            code="SyncRefused",
        )
        self.report = report


def sync(con: duckdb.DuckDBPyConnection, paths: Sequence[Path], *, max_remove_share: float, fmt: str = "auto",
         limits: Limits | None = None, server: str | None = None, force: bool = False,
         dry_run: bool = False, allow_lookalikes: bool = False) -> SyncReport:
    """Make the registry hold exactly the services of ``paths``: add new ones, update changed ones, remove the rest.

    Reads and checks every input first (a bad entry changes nothing), then writes in one transaction.
    """
    started = datetime.now()
    registry = Registry(con)
    incoming = read_incoming(registry, paths, fmt, limits, server, allow_lookalikes=allow_lookalikes, sync=True)
    current = registry.ids()
    report = SyncReport(files=incoming.files, skipped=incoming.skipped, lookalikes=incoming.lookalikes,
                        added=[s.id for s in incoming.new], updated=list(incoming.changes),
                        unchanged=len(incoming.unchanged), before=len(current), dry_run=dry_run, forced=force)
    report.removed = sorted(current - {s.id for s in incoming.services})
    if report.removed_share > max_remove_share and not force:
        raise SyncRefusedError(report, max_remove_share)
    if dry_run:
        return report
    report.run_id = write_incoming(con, registry, incoming, started=started, paths=paths, fmt=fmt, replace=True,
                                   removed=report.removed, sync=True)
    return report
