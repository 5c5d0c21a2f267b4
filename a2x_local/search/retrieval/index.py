"""Retrieval indexes on disk beside the registry database, keyed by what they were built from.

Layout: ``<db>.indexes/<kind>-<variant>-<content>/`` where *variant* hashes the settings (model, text options, BM25
parameters) and *content* hashes every (id, indexed text). A registry change gives a new content hash, so a stale
index is never loaded: the next search builds a fresh one and removes the older ones of that variant. Each index
is written into a temporary folder and renamed into place, so a crash never leaves a half-written index, and two
processes building the same index at once both end up with one complete copy.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from a2x_local.errors import InputError, UserError
from a2x_local.hashing import stable_hash
from a2x_local.jsonfiles import read_json

T = TypeVar("T")
META = "meta.json"
IDS = "ids.json"
_TMP_PREFIX = ".tmp-"
_TMP_MAX_AGE_S = 3600


def index_root(db_path: Path) -> Path:
    """The folder beside the database: ``registry.duckdb`` -> ``registry.duckdb.indexes``."""
    db_path = Path(db_path)
    return db_path.with_name(db_path.name + ".indexes")


def content_hash(ids: list[str], texts: list[str]) -> str:
    """Hash of what an index holds; changes whenever a service is added, removed or its indexed text changes."""
    digest = hashlib.sha256()
    for service_id, text in zip(ids, texts, strict=True):
        digest.update(f"{service_id}\x00{text}\x01".encode())
    return digest.hexdigest()[:16]


@dataclass
class IndexInfo:
    """What `a2x-local index` reports about one index."""

    kind: str
    path: Path
    built: bool
    seconds: float
    services: int
    variant: dict[str, Any] = field(default_factory=dict)
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.path), "built": self.built,
                "seconds": round(self.seconds, 3), "services": self.services, "variant": self.variant,
                "note": self.note}


class IndexStore:
    """Finds, builds and prunes the index folders of one registry database."""

    def __init__(self, db_path: Path) -> None:
        self.root = index_root(db_path)

    def folder(self, kind: str, variant: dict[str, Any], content: str) -> Path:
        return self.root / f"{kind}-{stable_hash(variant, 12)}-{content}"

    def load_or_build(self, kind: str, variant: dict[str, Any], ids: list[str], content: str,
                      build: Callable[[Path], None], load: Callable[[Path], T], *,
                      force: bool = False) -> tuple[T, IndexInfo]:
        """Load the current index, or build it with ``build(folder)`` into a temporary folder first.

        A complete folder that fails to load (a corrupted FAISS or BM25 file) is built again; a folder that cannot
        be written (a read-only registry) gets an index built for this process only."""
        final = self.folder(kind, variant, content)
        note = None
        if not force and self._complete(final, ids):
            try:
                return load(final), IndexInfo(kind, final, False, 0.0, len(ids), variant)
            except Exception as exc:  # any library's way of failing on a damaged file: the cure is the same
                note = f"rebuilt: the stored index failed to load ({type(exc).__name__}: {str(exc)[:200]})"
        started = time.perf_counter()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._remove_old_temporaries()
            tmp = self.root / f"{_TMP_PREFIX}{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            tmp.mkdir()
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            return self._build_unsaved(kind, variant, ids, content, build, load, started, reason=exc)
        try:
            self._fill(tmp, kind, variant, ids, content, build, started)
            self._install(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        self._prune(kind, variant, keep=final)
        seconds = time.perf_counter() - started
        return load(final), IndexInfo(kind, final, True, seconds, len(ids), variant, note)

    @staticmethod
    def _fill(folder: Path, kind: str, variant: dict[str, Any], ids: list[str], content: str,
              build: Callable[[Path], None], started: float) -> None:
        build(folder)
        (folder / IDS).write_text(json.dumps(ids), encoding="utf-8")
        meta = {"kind": kind, "variant": variant, "content": content, "services": len(ids),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "build_seconds": round(time.perf_counter() - started, 3)}
        # meta.json is written last: a folder that has it is complete.
        (folder / META).write_text(json.dumps(meta, indent=2), encoding="utf-8")

    def _build_unsaved(self, kind: str, variant: dict[str, Any], ids: list[str], content: str,
                       build: Callable[[Path], None], load: Callable[[Path], T], started: float, *,
                       reason: OSError) -> tuple[T, IndexInfo]:
        """The index for this process only, in a throw-away folder: the registry's folder cannot be written."""
        with tempfile.TemporaryDirectory(prefix="a2x-index-") as scratch:
            folder = Path(scratch)
            self._fill(folder, kind, variant, ids, content, build, started)
            loaded = load(folder)
        note = f"not saved: {self.root} cannot be written ({reason.strerror or reason}); built for this run only"
        return loaded, IndexInfo(kind, self.root, True, time.perf_counter() - started, len(ids), variant, note)

    def _complete(self, folder: Path, ids: list[str]) -> bool:
        if not (folder / META).is_file():
            return False
        try:
            stored = read_json(folder / IDS)
        except InputError:
            return False
        return stored == ids

    def _install(self, tmp: Path, final: Path) -> None:
        if final.exists():  # --force, or an older broken copy: move it aside, then swap in the new one
            aside = self.root / f"{_TMP_PREFIX}old-{final.name}-{uuid.uuid4().hex[:8]}"
            try:
                final.rename(aside)
            except FileNotFoundError:
                pass
            else:
                shutil.rmtree(aside, ignore_errors=True)
        try:
            tmp.rename(final)
        except OSError as exc:
            # Another process installed the same index between our check and now; theirs is as good as ours.
            if not (final / META).is_file():
                raise UserError(f"{final}: cannot install the index: {exc}",
                                hint="check the free disk space and the folder's permissions; the indexes are"
                                     " rebuilt on the next search") from exc

    def _prune(self, kind: str, variant: dict[str, Any], keep: Path) -> None:
        prefix = f"{kind}-{stable_hash(variant, 12)}-"
        for folder in self.root.glob(prefix + "*"):
            if folder != keep and folder.is_dir():
                shutil.rmtree(folder, ignore_errors=True)

    def _remove_old_temporaries(self) -> None:
        # Left behind only by a process killed mid-build; an hour is far longer than any build of one index.
        now = time.time()
        for folder in self.root.glob(_TMP_PREFIX + "*"):
            try:
                if now - folder.stat().st_mtime > _TMP_MAX_AGE_S:
                    shutil.rmtree(folder, ignore_errors=True)
            except FileNotFoundError:
                continue
