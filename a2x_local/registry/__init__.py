"""The service registry: a DuckDB file of services, and ingestion of real description formats into it.
Everything else in this package is private to it."""

from a2x_local.registry.config import RegistryConfig
from a2x_local.registry.formats import FORMATS, Limits, Skipped
from a2x_local.registry.ingest import ConflictError, IngestReport, ingest
from a2x_local.registry.language import ScriptProfile, resolve_language, script_profile
from a2x_local.registry.store import Registry
from a2x_local.registry.sync import SyncRefusedError, SyncReport, sync
from a2x_local.registry.types import Service

__all__ = [
    "FORMATS",
    "ConflictError",
    "IngestReport",
    "Limits",
    "Registry",
    "RegistryConfig",
    "ScriptProfile",
    "Service",
    "Skipped",
    "SyncRefusedError",
    "SyncReport",
    "ingest",
    "resolve_language",
    "script_profile",
    "sync",
]
