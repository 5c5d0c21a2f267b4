"""Lookalike identities (issue 21, finding 8): ids that differ only by case, Unicode form, an invisible character or
a homoglyph are one name to a person. A collision is refused naming both ids (or, with --allow-lookalikes, both
are stored and listed); bidi controls never sit in ids and are shown as <U+202E> in names, on the terminal, in the
HTTP API's answers and in MCP text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from a2x_local.registry import Service
from a2x_local.serve.http_api import create_app
from a2x_local.serve.views import ServiceView
from a2x_local.serve.visible import visible
from a2x_local.text import identity_key, mixed_script
from tests.serve.helpers import make_server
from tests.support.registries import make_registry, snapshot


def entries(path: Path, *ids: str) -> Path:
    path.write_text(json.dumps([{"id": i, "name": f"Tool {n}", "description": "Does a thing."}
                                for n, i in enumerate(ids)]), encoding="utf-8")
    return path


@pytest.mark.parametrize(("incoming", "why"), [
    ("Weather", "case"),
    ("ｗｅａｔｈｅｒ", "fullwidth letters"),
    ("wea\u200dther", "a zero-width joiner"),
    ("cafe\u0301", "NFD of an NFC id"),
])
def test_an_id_like_a_stored_one_is_refused_naming_both(cli, registry_db, tmp_path, incoming, why):
    make_registry(registry_db, [Service("café", "generic", "Cafe", "Finds cafes.")])
    before = snapshot(registry_db)
    result = cli("ingest", entries(tmp_path / "new.json", incoming), "--json")
    assert result.code == 1, (why, result.err)
    error = result.json()
    other = "café" if why.startswith("NFD") else "weather"
    assert error["error"] == "LookalikeId" and repr(incoming) in error["message"] and repr(other) in error["message"]
    assert "already in the registry" in error["message"] and "--allow-lookalikes" in error["hint"]
    assert snapshot(registry_db) == before


def test_lookalikes_within_one_input_and_homoglyphs_are_refused(cli, registry_db, tmp_path):
    pair = cli("ingest", entries(tmp_path / "pair.json", "Tool-A", "tool-a"))
    assert pair.code == 1 and "'tool-a'" in pair.err and "'Tool-A'" in pair.err
    cyrillic = cli("ingest", entries(tmp_path / "homoglyph.json", "w\u0435ather-pro"))   # Cyrillic е
    assert cyrillic.code == 1 and "mixes Cyrillic and Latin letters" in cyrillic.err
    sync = cli("ingest", "--sync", entries(tmp_path / "sync.json", "a", "A"))
    assert sync.code == 1 and "LookalikeId" not in sync.err and "looks like 'a'" in sync.err


def test_allow_lookalikes_stores_both_and_lists_them(cli, registry_db, tmp_path):
    result = cli("ingest", entries(tmp_path / "new.json", "Weather", "w\u0435ather-pro"), "--allow-lookalikes",
                 "--json")
    assert result.code == 0, result.err
    found = {look["id"]: look for look in result.json()["lookalikes"]}
    assert found["Weather"]["other"] == "weather" and "mixes" in found["w\u0435ather-pro"]["why"]
    ids = {s["id"] for s in cli("services", "list", "--json", "--limit", "100").json()}
    assert {"Weather", "weather", "w\u0435ather-pro"} <= ids


@pytest.mark.parametrize(("bad", "words"), [("tool\u202egnp.exe", "U+202E"), ("a\u200bb", "U+200B"),
                                            ("..", "path step")])
def test_ids_never_hold_bidi_controls_zero_width_spaces_or_dot_steps(cli, registry_db, tmp_path, bad, words):
    result = cli("ingest", entries(tmp_path / "bad.json", bad))
    assert result.code == 1 and "field 'id'" in result.err and words in result.err


def test_the_identity_key_and_script_check():
    assert identity_key("Ｗｅａ\u200bther\u202e") == identity_key("weather")
    assert identity_key("Straße") == identity_key("STRASSE")
    assert mixed_script("天気-weather") is None and mixed_script("погода") is None
    assert mixed_script("p\u0430ypal") == "Cyrillic and Latin"


def test_bidi_controls_in_names_are_shown_visibly_everywhere(cli, registry_db, db_path):
    make_registry(registry_db, [Service("disguise", "generic", "safe-tool\u202egnp.exe", "Converts images.")])
    shown = cli("services", "show", "disguise")
    assert "safe-tool<U+202E>gnp.exe" in shown.out and "\u202e" not in shown.out
    server = make_server(db_path)
    with TestClient(create_app(server.discovery, mcp=server.mcp), base_url="http://127.0.0.1") as client:
        answer = client.get("/v1/services/disguise")
        found = client.post("/v1/search", json={"query": "converts images", "method": "bm25"}).json()
    server.close()
    assert answer.json()["name"] == "safe-tool<U+202E>gnp.exe" and "\u202e" not in answer.text
    assert any(hit["name"] == "safe-tool<U+202E>gnp.exe" for hit in found["hits"])
    view = ServiceView(id="disguise", type="generic", name="safe-tool\u202egnp.exe", description="x",
                       metadata={"note": "\u2067isolated\u2069"}, source=None, categories=[])
    shown_view = visible(view)
    assert shown_view.name == "safe-tool<U+202E>gnp.exe" and shown_view.metadata == {"note": "<U+2067>isolated<U+2069>"}
