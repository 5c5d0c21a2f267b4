"""A damaged index file does not take search down: it is found when it fails to load and built again on the spot
(it used to fail every search until `index --force`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2x_local.search.retrieval.index import index_root


def scribble(folder: Path, pattern: str) -> list[Path]:
    damaged = [p for p in folder.rglob(pattern) if p.is_file()]
    for path in damaged:
        path.write_bytes(path.read_bytes()[:40] + b"\x00garbage")
    return damaged


@pytest.mark.parametrize("method,kind,pattern", [("dense", "dense", "*.faiss"), ("bm25", "bm25", "*.npy")])
def test_a_corrupted_index_is_rebuilt_and_the_search_answers(cli, registry_db, method, kind, pattern):
    first = cli("search", "weather forecast", "-m", method, "--json")
    assert first.code == 0, first.err
    [folder] = index_root(registry_db).glob(f"{kind}-*")
    assert scribble(folder, pattern)
    again = cli("search", "weather forecast", "-m", method, "--json")
    assert again.code == 0, again.err
    assert again.json()["hits"][0]["service_id"] == first.json()["hits"][0]["service_id"] == "weather"
    report = cli("index", "--only", kind, "--json")
    assert report.code == 0 and report.json()["indexes"][0]["built"] is False     # the rebuilt copy is current


def test_index_reports_the_rebuild(cli, registry_db):
    assert cli("index", "--only", "dense").code == 0
    [folder] = index_root(registry_db).glob("dense-*")
    scribble(folder, "*.faiss")
    report = cli("index", "--only", "dense", "--json")
    assert report.code == 0, report.err
    [info] = report.json()["indexes"]
    assert info["built"] and info["note"].startswith("rebuilt: the stored index failed to load")
