"""What the server knows of the registry between reloads: its services, its active tree and its fingerprint.

DuckDB lets one process write a database file, and while any other process has it open (even read-only) that
writer cannot open it. A server that kept a connection would lock the nightly job out, so the server holds none:
it reads a snapshot through a short read-only connection, keeps it in memory, and reads a new one only when the
file changed (its size or modification time, or those of its write-ahead log) and the registry fingerprint or the
active tree id differ from the snapshot's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import duckdb

from a2x_local.db import check_db_path, connect_when_free, held_in_process, translate
from a2x_local.errors import A2XError, UserError
from a2x_local.registry import Registry, Service
from a2x_local.taxonomy import Tree, active_build_id, load_tree


@dataclass(frozen=True)
class FileStamp:
    """Size and modification time of the database file and its write-ahead log: cheap to take on every request."""

    parts: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, db_path: Path) -> FileStamp:
        parts = []
        for path in (db_path, db_path.with_name(db_path.name + ".wal")):
            try:
                stat = path.stat()
                parts.append((stat.st_mtime_ns, stat.st_size))
            except FileNotFoundError:
                parts.append((0, -1))
        return cls(tuple(parts))


@dataclass(frozen=True)
class Identity:
    """What decides whether a snapshot is current: the services' fingerprint and the active tree's id."""

    fingerprint: str
    build_id: int | None


@dataclass
class Snapshot:
    """One consistent read of the registry. Never changed after it is made: requests keep the one they started
    with, so a reload never changes the tree under a request in flight."""

    generation: int
    identity: Identity
    services: dict[str, Service]
    tree: Tree | None

    @property
    def fingerprint(self) -> str:
        return self.identity.fingerprint

    @property
    def build_id(self) -> int | None:
        return self.identity.build_id

    @property
    def tree_is_stale(self) -> bool:
        """The active tree was built for other registry contents (its categories may miss or name services)."""
        return self.tree is not None and self.tree.registry_fingerprint != self.fingerprint

    @cached_property
    def placements(self) -> dict[str, list[str]]:
        """Service id -> the tree nodes it is filed under (several for cross-domain services)."""
        found: dict[str, list[str]] = defaultdict(list)
        if self.tree is not None:
            for node in self.tree.walk():
                for service_id in node.services:
                    found[service_id].append(node.id)
        return dict(found)


@contextmanager
def read_only(db_path: Path, *, wait_s: float) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection for the length of a block, waiting up to ``wait_s`` for a writer to let go."""
    if not db_path.is_file():
        raise UserError(f"{db_path}: no registry database here",
                        hint="load services first (a2x-local ingest PATH --db FILE), or point --db at the registry")
    check_db_path(db_path)       # its write-ahead log too: a named pipe there would block the open
    hint = "the server keeps answering from the snapshot it has"
    with held_in_process(db_path, wait_s=wait_s, busy=f"{db_path}: a method build of this server is reading the"
                         " registry database", hint=hint):
        try:
            # Short pauses: a request is waiting, and the snapshot it has keeps serving meanwhile.
            con = connect_when_free(db_path, read_only=True, wait_s=wait_s, first_delay=0.02, max_delay=0.25,
                                    busy=f"{db_path}: another process holds the registry database", hint=hint)
        except duckdb.Error as exc:
            raise unreadable(db_path, exc) from exc
        try:
            yield con
        except duckdb.Error as exc:
            raise unreadable(db_path, exc) from exc
        finally:
            con.close()


def unreadable(db_path: Path, exc: duckdb.Error) -> A2XError:
    """What a failed read of the file under the server means: damaged blocks, a DuckDB file of another program (no
    registry tables), or another failure; the server keeps answering from the snapshot it has."""
    error = translate(exc, db_path)
    if error is not None:
        return error
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, duckdb.CatalogException):
        return UserError(f"{db_path}: not an a2x-local registry any more ({first}): the file was replaced by another"
                         " database", hint="put the registry file back (the server keeps answering from the snapshot"
                                           " it has)", code="ForeignDatabase")
    return UserError(f"{db_path}: cannot read the registry database: {first}",
                     hint="check the database file the server was started with (--db); it keeps answering from"
                          " the snapshot it has")


def read_identity(con: duckdb.DuckDBPyConnection) -> Identity:
    return Identity(Registry(con).fingerprint(), active_build_id(con))


def read_snapshot(con: duckdb.DuckDBPyConnection, generation: int) -> Snapshot:
    """Services, fingerprint and active tree from one connection (so they belong together)."""
    identity = read_identity(con)
    tree = load_tree(con, identity.build_id) if identity.build_id is not None else None
    services = {service.id: service for service in Registry(con).all()}
    return Snapshot(generation, identity, services, tree)
