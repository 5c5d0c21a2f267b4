"""The NumPy BERT encoder that answers queries without torch (issue 33: serve's first hybrid search within 5 s):
its vectors are sentence-transformers' for the same weights, a folder it does not recognise falls back, and a
hybrid search on indexes built beforehand never imports torch."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from a2x_local.llm import BUILTIN_MINILM, load_embedder, load_query_embedder, resolve_embedding
from a2x_local.llm.bert_numpy import numpy_encoder
from a2x_local.search.retrieval.config import RetrievalConfig
from a2x_local.search.retrieval.dense import Embedder
from tests.support.processes import python_command, tree_env

CONFIG = RetrievalConfig.defaults()
TEXTS = [
    "convert 100 USD to EUR",
    "  find hotels in Lyon, then book a table near it  ",     # outer spaces, punctuation
    "a",
    "weather " * 300,                                          # past the model's 256 tokens: cut as the library cuts
    "找一家酒店",                                                # CJK characters, one token each
    "Émile's café — naïve résumé?",                            # accents (the model lower-cases and strips them)
    "",
]


@pytest.fixture(scope="module")
def minilm():
    return resolve_embedding(BUILTIN_MINILM, CONFIG.embedding_models)


def test_the_numpy_vectors_are_sentence_transformers_vectors(minilm) -> None:
    light = load_query_embedder(minilm)
    full = load_embedder(minilm)
    assert light is not None and light.runtime == "numpy" and light.dimension == full.dimension == 384
    # Batched (texts of very different lengths padded together) and one by one: the same vectors.
    batched = light.encode(TEXTS, query=True, batch_size=32)
    single = np.stack([light.encode([text], query=True, batch_size=1)[0] for text in TEXTS])
    expected = full.encode(TEXTS, query=True, batch_size=32)
    assert batched.dtype == np.float32 and batched.shape == (len(TEXTS), 384)
    assert np.abs(batched - expected).max() < 1e-5, np.abs(batched - expected).max(axis=1)
    assert np.abs(single - expected).max() < 1e-5
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    assert light.encode([], query=True, batch_size=8).shape == (0, 384)


def test_the_embedder_encodes_queries_in_numpy_and_services_with_the_library(minilm) -> None:
    embedder = Embedder(BUILTIN_MINILM, CONFIG)
    assert embedder.query_runtime == "numpy"
    queries = embedder.encode_queries(["send an email"])
    passages = embedder.encode_passages(["send an email"])      # the library (the same weights, prefixes none)
    assert np.abs(queries - passages).max() < 1e-5


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


@pytest.mark.parametrize("change", ["cls pooling", "another architecture", "no tokenizer file", "weights missing"])
def test_a_folder_it_does_not_know_exactly_falls_back_to_the_library(minilm, tmp_path: Path, change: str) -> None:
    folder = _copy(minilm.location, tmp_path / "model")
    if change == "cls pooling":
        pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
        pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    elif change == "another architecture":
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    elif change == "no tokenizer file":
        (folder / "tokenizer.json").unlink()
    else:
        from safetensors.numpy import load_file, save_file

        weights = load_file(str(folder / "model.safetensors"))
        del weights["encoder.layer.5.output.dense.weight"]
        save_file(weights, str(folder / "model.safetensors"))
    assert numpy_encoder(folder) is None
    embedder = Embedder(str(folder), CONFIG)
    assert embedder.query_runtime == "sentence-transformers"


def test_a_hybrid_search_on_built_indexes_never_imports_torch(registry_db: Path) -> None:
    """What made the server's first hybrid search slow: sentence-transformers' import (torch, transformers,
    scikit-learn), 5 s of one core. Indexes are built here (that needs the library), then a fresh process searches."""
    from a2x_local.search import make_method
    from a2x_local.settings import load_settings

    make_method("hybrid", load_settings(db=registry_db), registry_db)      # builds the dense and BM25 indexes
    code = ("import sys\nfrom pathlib import Path\nfrom a2x_local.search import make_method\n"
            "from a2x_local.settings import load_settings\n"
            "db = Path(sys.argv[1])\nmethod = make_method('hybrid', load_settings(db=db), db)\n"
            "hits = method.retrieve(['send an email'], 3)[0]\n"
            "print(len(hits), method.describe()['query_runtime'],"
            " sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))")
    done = subprocess.run(python_command(code, str(registry_db)), env=tree_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["3", "numpy", "[]"], done.stdout + done.stderr[-2000:]
