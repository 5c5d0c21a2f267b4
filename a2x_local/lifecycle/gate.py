"""The regression gate: the candidate tree and the active one answer the same queries; the candidate may replace
the active tree only if its hit rate falls by at most the allowed points.

Both runs go through the evaluation harness (the same records, metrics and report files as `a2x-local eval`),
with the A2X search over each tree and the same engine. The active tree is searched as it serves now: services
the registry no longer has are left out of it; services it never held it cannot find, which is the point.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2x_local.evaluation import (
    EvaluationConfig,
    describe_method,
    load_queries,
    plan_run,
    registry_info,
    run_evaluation,
)
from a2x_local.jsonfiles import JsonLimits
from a2x_local.llm import Engine
from a2x_local.registry import Service
from a2x_local.search import tree_search
from a2x_local.settings import Settings
from a2x_local.taxonomy import Tree


@dataclass
class GateResult:
    candidate: int
    active: int
    candidate_hit: float     # percent
    active_hit: float        # percent
    max_drop: float          # percentage points
    queries: int
    runs: dict[str, str]

    @property
    def drop(self) -> float:
        return round(self.active_hit - self.candidate_hit, 4)

    @property
    def passed(self) -> bool:
        return self.drop <= self.max_drop

    def to_dict(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "active": self.active, "candidate_hit": self.candidate_hit,
                "active_hit": self.active_hit, "drop": self.drop, "max_drop": self.max_drop,
                "passed": self.passed, "queries": self.queries, "runs": self.runs}


def run_gate(settings: Settings, *, candidate: Tree, active: Tree, services: dict[str, Service], engine: Engine,
             queries_file: Path, max_drop: float, out_dir: Path) -> GateResult:
    """Evaluate both trees on ``queries_file`` (run folders under ``out_dir``) and compare their hit rates; the
    queries are read and the registry identified once for both."""
    serving = active.without_services(active.service_ids() - set(services))
    runs = {"candidate": str(out_dir / f"tree-{candidate.build_id}"),
            "active": str(out_dir / f"tree-{active.build_id}")}
    config = EvaluationConfig.from_settings(settings)
    registry = registry_info(settings.db_path, lock_timeout_s=settings.lock_timeout_s)
    queries = load_queries(queries_file, JsonLimits.from_settings(settings))

    def hit(tree: Tree, out: Path) -> tuple[float, int]:
        method = tree_search(settings, tree, services, engine)
        plan = plan_run(method="a2x", options={"tree": tree.build_id}, mode=None, k=10, queries_file=queries_file,
                        registry=registry, config=config, out=out, method_info=describe_method(method, "a2x"))
        summary = run_evaluation(method, queries, plan, registry, config, fresh=True, plots=False)
        return round(100.0 * summary["hit_rate"], 4), summary["queries"]["scored"]

    active_hit, scored = hit(serving, Path(runs["active"]))
    candidate_hit, _ = hit(candidate, Path(runs["candidate"]))
    return GateResult(candidate.build_id, active.build_id, candidate_hit, active_hit, max_drop, scored, runs)
