"""An LLM search with a model that is not there fails at once: the model is checked before the retrieval
pre-filter (embedding model, indexes) loads, as `build` checks it before any work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.search.retrieval.index import index_root
from tests.support.registries import SERVICES


@pytest.fixture
def with_tree(registry_db: Path, cli, tmp_path: Path) -> Path:
    """A two-leaf tree over the ten services, active, and no retrieval index yet: a pre-filter that loads builds
    its indexes beside the registry, so what is there afterwards says whether it loaded."""
    ids = [service.id for service in SERVICES]
    tree = {"format": "a2x-tree", "version": 1, "root": {"name": "All", "description": "Everything.", "children": [
        {"name": "Travel", "description": "Trips.", "services": ids[:5]},
        {"name": "Other", "description": "The rest.", "services": ids[5:]}]}}
    (tmp_path / "tree.json").write_text(json.dumps(tree), encoding="utf-8")
    assert cli("tree", "import", tmp_path / "tree.json").code == 0
    assert not index_root(registry_db).exists()
    return registry_db


@pytest.mark.parametrize("method", ["a2x", "a2x+rescue", "select"])
@pytest.mark.parametrize(("model", "words"), [("no-such-model", "unknown model 'no-such-model'"),
                                              ("qwen2.5-7b", "is not usable")])
def test_a_missing_model_fails_before_retrieval_loads(with_tree: Path, cli, method: str, model: str,
                                                      words: str):
    result = cli("search", "convert dollars to euros", "-m", method, "--model", model, "--json")
    assert result.code == 1, result.err
    assert words in result.err and "\nhint: " in result.err
    assert not index_root(with_tree).exists(), "the retrieval pre-filter was loaded first"
