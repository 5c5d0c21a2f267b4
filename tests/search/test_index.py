"""Indexes beside the database: reused while current, rebuilt when the registry changes, never half written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.db import connect, transaction
from a2x_local.errors import UserError
from a2x_local.registry import Registry, Service
from a2x_local.search.retrieval.config import RetrievalConfig
from a2x_local.search.retrieval.corpus import EMBEDDING_SETTING, embedding_model, ensure_bm25, ensure_dense, load_corpus
from a2x_local.search.retrieval.index import META, IndexStore, index_root

NEW = Service("parking", "generic", "findParking", "Find a free parking space near an address.")


def _folders(registry_db: Path, kind: str) -> list[str]:
    return sorted(p.name for p in index_root(registry_db).glob(f"{kind}-*"))


def test_bm25_index_is_reused_then_rebuilt_when_the_registry_changes(registry_db: Path) -> None:
    config = RetrievalConfig.defaults()
    _, info = ensure_bm25(load_corpus(registry_db), config)
    assert info.built and info.services == 10
    assert info.path.parent == registry_db.with_name(registry_db.name + ".indexes")
    assert json.loads((info.path / "meta.json").read_text())["services"] == 10
    _, again = ensure_bm25(load_corpus(registry_db), config)
    assert not again.built and again.path == info.path

    with connect(registry_db) as con, transaction(con):
        Registry(con).insert([NEW])
    fresh, rebuilt = ensure_bm25(load_corpus(registry_db), config)
    assert rebuilt.built and rebuilt.path != info.path
    assert _folders(registry_db, "bm25") == [rebuilt.path.name]      # the stale index was removed
    assert fresh.ids[fresh.search(["parking space"], 1)[0][0][0]] == "parking"

    with connect(registry_db) as con, transaction(con):
        Registry(con).update([Service("parking", "generic", "findParking", "Locate car parks.")])
    _, changed = ensure_bm25(load_corpus(registry_db), config)
    assert changed.built and changed.path != rebuilt.path


def test_text_options_make_separate_indexes(registry_db: Path) -> None:
    _, one = ensure_bm25(load_corpus(registry_db), RetrievalConfig.defaults())
    _, two = ensure_bm25(load_corpus(registry_db), RetrievalConfig.defaults(text="description"))
    _, three = ensure_bm25(load_corpus(registry_db), RetrievalConfig.defaults(text_params=True))
    assert len({one.path, two.path, three.path}) == 3
    assert len(_folders(registry_db, "bm25")) == 3                    # variants live side by side


def test_force_rebuilds(registry_db: Path) -> None:
    _, first = ensure_bm25(load_corpus(registry_db), RetrievalConfig.defaults())
    _, forced = ensure_bm25(load_corpus(registry_db), RetrievalConfig.defaults(), force=True)
    assert forced.built and forced.path == first.path
    assert (forced.path / "meta.json").is_file()


def test_a_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    store = IndexStore(tmp_path / "r.duckdb")

    def broken(folder: Path) -> None:
        (folder / "half-written").write_text("x")
        raise RuntimeError("killed mid-build")

    with pytest.raises(RuntimeError):
        store.load_or_build("bm25", {"v": 1}, ["a"], "c0ffee", broken, lambda folder: folder)
    assert list(store.root.iterdir()) == []


def test_an_incomplete_folder_is_rebuilt(tmp_path: Path) -> None:
    store = IndexStore(tmp_path / "r.duckdb")
    folder = store.folder("bm25", {"v": 1}, "c0ffee")
    folder.mkdir(parents=True)
    (folder / "junk").write_text("no meta.json: not complete")
    built: list[Path] = []
    _, info = store.load_or_build("bm25", {"v": 1}, ["a"], "c0ffee", built.append, lambda f: f)
    assert info.built and len(built) == 1 and not (folder / "junk").exists()
    complete = [json.loads(meta.read_text())["services"] for meta in store.root.glob(f"*/{META}")]
    assert complete == [1]   # one complete index folder: the rebuilt one


def test_dense_index_follows_the_registry_setting(registry_db: Path) -> None:
    config = RetrievalConfig.defaults()
    corpus = load_corpus(registry_db)
    assert embedding_model(corpus, config) == "all-MiniLM-L6-v2"
    embedder, index, info = ensure_dense(corpus, config)
    assert info.built and index.kind == "IndexFlatIP"
    model_dir = str(embedder.path)
    with connect(registry_db) as con, transaction(con):
        Registry(con).set_setting(EMBEDDING_SETTING, model_dir)
    corpus = load_corpus(registry_db)
    assert embedding_model(corpus, config) == model_dir
    assert embedding_model(corpus, config, override="other") == "other"
    # the same weights by path: same model, same index
    _, _, again = ensure_dense(corpus, config)
    assert not again.built and again.path == info.path
    with connect(registry_db) as con, transaction(con):
        Registry(con).insert([NEW])
    _, index, rebuilt = ensure_dense(load_corpus(registry_db), config)
    assert rebuilt.built and index.index.ntotal == 11


def test_empty_registry_is_a_clear_error(tmp_path: Path, home: Path) -> None:
    with pytest.raises(UserError, match="the registry is empty") as err:
        load_corpus(tmp_path / "empty.duckdb")
    assert "ingest" in err.value.hint


def test_a_corpus_computes_texts_and_their_hash_once_per_text_option(registry_db: Path) -> None:
    corpus = load_corpus(registry_db)
    config = RetrievalConfig.defaults()
    options = config.text_options()
    assert corpus.texts(options) is corpus.texts(options)
    assert corpus.texts(RetrievalConfig.defaults(text="description").text_options()) != corpus.texts(options)
    _, dense = ensure_dense(corpus, config)[1:]
    _, bm25 = ensure_bm25(corpus, config)
    # Both indexes are named by the one content hash of (id, text) the corpus computed.
    assert dense.path.name.endswith(corpus.content(options)) and bm25.path.name.endswith(corpus.content(options))
