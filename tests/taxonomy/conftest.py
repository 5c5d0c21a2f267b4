"""Fixtures for taxonomy tests: real ToolRet services, registries in temporary databases, scripted engines."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pytest

from a2x_local.db import connect
from a2x_local.llm import Request
from a2x_local.registry.store import Registry
from a2x_local.registry.types import Service
from a2x_local.taxonomy.config import BuildConfig
from tests.support.paths import TOOLRET as TOOLRET_DIR

TOOLRET = TOOLRET_DIR / "services.json"


@pytest.fixture(scope="session")
def toolret() -> list[Service]:
    """All 1,839 ToolRet services, in id order."""
    data = json.loads(TOOLRET.read_text(encoding="utf-8"))
    return sorted((Service(d["id"], d["type"], d["name"], d["description"], d.get("metadata", {}))
                   for d in data), key=lambda s: s.id)


@pytest.fixture(scope="session")
def toolret_subset(toolret: list[Service]) -> list[Service]:
    """About 300 real services spread over the whole catalogue (every sixth)."""
    return toolret[::6]


def small_config(**overrides) -> BuildConfig:
    """Thresholds scaled down to a few hundred services, so every path of the algorithm runs quickly."""
    values = {"leaf_max_services": 15, "max_depth": 3, "max_children": 8, "keyword_path_min_services": 150,
              "keyword_batch_size": 25, "keyword_merge": "stem", "assign_batch_size": 10}
    values.update(overrides)
    return BuildConfig.defaults(**values)


def make_registry(db_path: Path, services: Iterable[Service]) -> Path:
    with connect(db_path) as con:
        Registry(con).insert(list(services))
    return db_path


def synthetic(domains: Sequence[str], per_domain: int) -> list[Service]:
    """Services named after their domain ('weather 3'), so a rule can tell where each belongs."""
    return [Service(f"{d}_{i:02d}", "generic", f"{d} tool {i}", f"Does {d} things, variant {i}.")
            for d in domains for i in range(per_domain)]


class Recorder:
    """Wraps a rule and keeps every request it answered, by step."""

    def __init__(self, rule: Callable[[Request], str]) -> None:
        self.rule = rule
        self.requests: list[Request] = []

    def __call__(self, request: Request) -> str:
        self.requests.append(request)
        return self.rule(request)

    def of(self, step: str) -> list[Request]:
        return [r for r in self.requests if r.context.get("step") == step]
