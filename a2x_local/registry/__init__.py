"""The service registry: a DuckDB file of services, and ingestion of real description formats into it."""

from a2x_local.registry.store import Registry, RegistryStats
from a2x_local.registry.types import SERVICE_TYPES, Service, content_hash

__all__ = ["SERVICE_TYPES", "Registry", "RegistryStats", "Service", "content_hash"]
