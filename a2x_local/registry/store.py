"""Reading and writing services in the DuckDB registry. Callers own the connection and the transaction."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from a2x_local.db import load_temp_table
from a2x_local.errors import UserError
from a2x_local.registry.types import Service, canonical_json

_COLUMNS = "id, type, name, description, metadata, source"


def _service(row: Sequence[Any]) -> Service:
    metadata = json.loads(row[4]) if row[4] else {}
    return Service(id=row[0], type=row[1], name=row[2], description=row[3], metadata=metadata, source=row[5])


@dataclass(frozen=True)
class RegistryStats:
    """What `a2x-local stats` shows."""

    services: int
    by_type: dict[str, int]
    by_source: dict[str, int]
    description_chars: dict[str, float]
    fingerprint: str
    ingest_runs: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "services": self.services,
            "by_type": self.by_type,
            "by_source": self.by_source,
            "description_chars": self.description_chars,
            "fingerprint": self.fingerprint,
            "ingest_runs": self.ingest_runs,
        }


class Registry:
    """The services table of one open database."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def count(self) -> int:
        return self.con.execute("SELECT count(*) FROM services").fetchone()[0]

    def get(self, service_id: str) -> Service | None:
        row = self.con.execute(f"SELECT {_COLUMNS} FROM services WHERE id = ?", [service_id]).fetchone()
        return _service(row) if row else None

    def require(self, service_id: str) -> Service:
        service = self.get(service_id)
        if service is None:
            raise UserError(f"no service with id '{service_id}'", hint="`a2x-local services list` shows the ids")
        return service

    def get_many(self, ids: Iterable[str]) -> dict[str, Service]:
        """Services by id for the ids that exist (unknown ids are simply absent)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        rows = self.con.execute(
            f"SELECT {_COLUMNS} FROM services WHERE id IN (SELECT unnest(?))", [wanted]
        ).fetchall()
        return {row[0]: _service(row) for row in rows}

    def all(self) -> list[Service]:
        """Every service, ordered by id (a stable order every stage can rely on)."""
        rows = self.con.execute(f"SELECT {_COLUMNS} FROM services ORDER BY id").fetchall()
        return [_service(row) for row in rows]

    def list(self, *, service_type: str | None = None, source: str | None = None, limit: int | None = None,
             offset: int = 0) -> list[Service]:
        where, params = [], []
        if service_type:
            where.append("type = ?")
            params.append(service_type)
        if source:
            where.append("source LIKE ?")
            params.append(f"%{source}%")
        sql = f"SELECT {_COLUMNS} FROM services"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        if offset:
            sql += f" OFFSET {int(offset)}"
        return [_service(row) for row in self.con.execute(sql, params).fetchall()]

    def ids(self) -> set[str]:
        return {row[0] for row in self.con.execute("SELECT id FROM services").fetchall()}

    def updated_since(self, when: datetime) -> set[str]:
        """Ids of services added or rewritten after ``when``: a tree made then may hold them with older text."""
        return {row[0] for row in self.con.execute("SELECT id FROM services WHERE updated_at > ?", [when]).fetchall()}

    def remove(self, ids: Sequence[str]) -> int:
        """Delete services by id; unknown ids are an error and nothing is deleted."""
        found = self.get_many(ids)
        missing = [service_id for service_id in dict.fromkeys(ids) if service_id not in found]
        if missing:
            raise UserError(f"no service with id {', '.join(repr(m) for m in missing)}; nothing removed",
                            hint="`a2x-local services list` shows the ids")
        self.con.execute("DELETE FROM services WHERE id IN (SELECT unnest(?))", [list(ids)])
        return len(set(ids))

    def insert(self, services: Sequence[Service]) -> None:
        """Insert new services in bulk (callers have checked the ids are new)."""
        if load_temp_table(self.con, "_incoming", _LOAD_COLUMNS, (_row(s) for s in services)):
            self.con.execute(
                "INSERT INTO services SELECT id, type, name, description, metadata::JSON, source, content_hash,"
                " now(), now() FROM _incoming"
            )

    def update(self, services: Sequence[Service]) -> None:
        """Overwrite existing services (keeps their creation time)."""
        if load_temp_table(self.con, "_incoming", _LOAD_COLUMNS, (_row(s) for s in services)):
            self.con.execute(
                "UPDATE services SET type = i.type, name = i.name, description = i.description,"
                " metadata = i.metadata::JSON, source = i.source, content_hash = i.content_hash, updated_at = now()"
                " FROM _incoming AS i WHERE services.id = i.id"
            )

    def fingerprint(self) -> str:
        """Hash over every (id, name, description); a tree is current while this value is unchanged."""
        digest = hashlib.sha256()
        for service_id, chash in self.con.execute("SELECT id, content_hash FROM services ORDER BY id").fetchall():
            digest.update(f"{service_id}\x00{chash}\n".encode())
        return digest.hexdigest()

    def stats(self) -> RegistryStats:
        by_type = dict(self.con.execute(
            "SELECT type, count(*) FROM services GROUP BY type ORDER BY count(*) DESC, type").fetchall())
        by_source = dict(self.con.execute(
            "SELECT coalesce(source, '(none)'), count(*) FROM services GROUP BY 1 ORDER BY 2 DESC, 1").fetchall())
        row = self.con.execute(
            "SELECT count(*), min(l), avg(l), quantile_cont(l, 0.5), quantile_cont(l, 0.9), max(l)"
            " FROM (SELECT length(description) AS l FROM services)"
        ).fetchone()
        keys = ("min", "mean", "p50", "p90", "max")
        lengths = {k: (round(float(v), 1) if v is not None else 0.0) for k, v in zip(keys, row[1:], strict=True)}
        runs = self.con.execute("SELECT count(*) FROM ingest_runs").fetchone()[0]
        return RegistryStats(row[0], by_type, by_source, lengths, self.fingerprint(), runs)

    def get_setting(self, key: str, default: Any = None) -> Any:
        row = self.con.execute("SELECT value FROM registry_settings WHERE key = ?", [key]).fetchone()
        return json.loads(row[0]) if row else default

    def set_setting(self, key: str, value: Any) -> None:
        self.con.execute(
            "INSERT OR REPLACE INTO registry_settings VALUES (?, ?, now())", [key, json.dumps(value)]
        )


_LOAD_COLUMNS = {"id": "VARCHAR", "type": "VARCHAR", "name": "VARCHAR", "description": "VARCHAR",
                 "metadata": "VARCHAR", "source": "VARCHAR", "content_hash": "VARCHAR"}


def _row(service: Service) -> dict[str, Any]:
    return {"id": service.id, "type": service.type, "name": service.name, "description": service.description,
            "metadata": canonical_json(service.metadata), "source": service.source,
            "content_hash": service.content_hash}
