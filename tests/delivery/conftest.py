"""The session's CPU bundle for the slow offline-delivery tests (see tests/delivery/offline.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.delivery.offline import dependency_bundle, run_bundle


@pytest.fixture(scope="session")
def cpu_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CPU bundle of this tree: the cached dependency wheels and a2x-local's wheel built now."""
    cached = dependency_bundle()
    out = tmp_path_factory.mktemp("bundle") / "a2x-cpu"
    run_bundle("--target", "cpu", "--reuse", str(cached), "--out", str(out))
    return out
