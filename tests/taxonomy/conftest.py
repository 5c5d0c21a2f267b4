"""Fixtures of the taxonomy tests: the real ToolRet services (data/toolret)."""

from __future__ import annotations

import pytest

from a2x_local.registry import Service
from tests.support.registries import toolret_services


@pytest.fixture(scope="session")
def toolret() -> list[Service]:
    """All 1,839 ToolRet services, in id order."""
    return toolret_services()


@pytest.fixture(scope="session")
def toolret_subset(toolret: list[Service]) -> list[Service]:
    """About 300 real services spread over the whole catalogue (every sixth)."""
    return toolret[::6]
