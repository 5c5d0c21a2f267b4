"""Shared fixtures: an isolated home, the ten-service registry, settings pointing at it."""

from tests.search.registry_fixture import db_path, home, settings  # noqa: F401
