"""How `scripts/test` spreads the suite over pytest-xdist workers (`--dist loadgroup` selects this scheduler).

- Every test file that uses the session vLLM engine (fixture `vllm_engine`) is one work unit: one worker runs
  them all and starts one engine (~3 GB) instead of one per worker. It is the longest unit, so it goes first.
- Every other module is a unit of its own, so a module-scoped fixture (a model server, a built tree) is made once.

xdist's own `loadgroup` reads `xdist_group` marks from node ids it rewrites during collection, which pytest 9.2
no longer allows (pytest-xdist#1386): it silently spreads a group over every worker. The controller process
collects nothing, so the engine files are listed here, and collection fails when a test elsewhere uses the engine
(`check_engine_files`), so the list cannot fall behind.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

from tests.support.paths import ROOT

ENGINE_UNIT = "vllm-engine"
ENGINE_FILES = frozenset({
    "tests/compose/test_engine.py",
    "tests/lifecycle/test_update_vllm.py",
    "tests/llm/test_sanitize_vllm.py",
    "tests/llm/test_vllm_engine.py",
    "tests/search/test_a2x_e2e.py",
    "tests/search/test_chinese_e2e.py",
    "tests/serve/test_engine_serve.py",
    "tests/taxonomy/test_build_vllm.py",
})


class EngineGroupScheduling(LoadScopeScheduling):
    def _split_scope(self, nodeid: str) -> str:
        if nodeid.split("::", 1)[0] in ENGINE_FILES:
            return ENGINE_UNIT
        return super()._split_scope(nodeid)

    def _assign_work_unit(self, node: WorkerController) -> None:
        if ENGINE_UNIT in self.workqueue:
            self.workqueue.move_to_end(ENGINE_UNIT, last=False)
        super()._assign_work_unit(node)


def check_engine_files(items: Iterable[pytest.Item]) -> None:
    """Refuse a collection in which a test outside `ENGINE_FILES` uses the session engine."""
    stray = sorted({Path(item.path).relative_to(ROOT).as_posix() for item in items
                    if "vllm_engine" in getattr(item, "fixturenames", ())} - ENGINE_FILES)
    if stray:
        raise pytest.UsageError(f"tests outside ENGINE_FILES use the session vLLM engine: {', '.join(stray)}; add "
                                "them to ENGINE_FILES in tests/support/scheduling.py (one worker runs them all)")
