"""Helpers of the taxonomy tests: scaled-down thresholds, synthetic registries, a recording rule."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from a2x_local.llm import Request
from a2x_local.registry import Service
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.builder import Builder
from a2x_local.taxonomy.induction.state import BuildState
from a2x_local.testing import ScriptedEngine


def small_config(**overrides) -> BuildConfig:
    """Thresholds scaled down to a few hundred services, so every path of the algorithm runs quickly."""
    values = {"leaf_max_services": 15, "max_depth": 3, "max_children": 8, "keyword_path_min_services": 150,
              "keyword_batch_size": 25, "keyword_merge": "stem", "assign_batch_size": 10}
    values.update(overrides)
    return BuildConfig.defaults(**values)


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


def build(services: Sequence[Service], config: BuildConfig, rule: Callable[[Request], str],
          **engine_kwargs) -> tuple[BuildState, ScriptedEngine]:
    """Run a whole build in memory with a scripted engine answering by ``rule``."""
    by_id = {s.id: s for s in services}
    engine = ScriptedEngine(rule, **engine_kwargs)
    state = BuildState.start(sorted(by_id))
    builder = Builder(state, by_id, config, engine)
    while not builder.finished:
        builder.step()
    return state, engine
