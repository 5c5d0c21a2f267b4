"""`a2x-local search` in a terminal: rank, id and score stay whole at every width, whatever the descriptions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from a2x_local.cli.output import console
from a2x_local.registry import Service
from tests.support.registries import make_registry

# Long ids, names and descriptions: the case where rich alone squeezed #, id and score to nothing.
LONG = [Service(f"mcp_service_{n}/convert_currency_between_any_two_world_currencies_{n}", "generic",
                f"Currency Converter Pro Max Ultra Edition {n}",
                f"Convert an amount of money from one currency to another, dollars to euros and back. {n} " * 12)
        for n in range(6)]
WIDTHS = [40, 60, 80, 99, 100, 120, 160, 220]


@pytest.fixture
def long_registry(db_path: Path) -> Path:
    return make_registry(db_path, LONG)


@pytest.fixture
def hits(long_registry: Path, cli) -> list[dict]:
    result = cli("search", "convert 100 dollars to euros", "-m", "bm25", "--k", "5", "--json")
    assert result.code == 0, result.err
    found = result.json()["hits"]
    assert len(found) == 5
    return found


@pytest.mark.parametrize("width", WIDTHS)
def test_rank_id_and_score_stay_whole(hits: list[dict], cli, monkeypatch, width: int):
    monkeypatch.setattr(console, "width", width)
    result = cli("search", "convert 100 dollars to euros", "-m", "bm25", "--k", "5")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    longest = max(len(hit["service_id"]) for hit in hits)
    # A table whenever rank, id and score fit (the description at 100 columns and more); below, a hit's rank, id
    # and score on a line of their own (as wide as they are: the terminal wraps it, rich never cuts it).
    assert all(len(line) <= max(width, longest + 11) for line in lines), f"a line is wider than {width}:\n{result.out}"
    table = any(line.startswith("┃") for line in lines)
    assert table == (width >= longest + 17), result.out
    if table:
        header = next(line for line in lines if " id " in line)
        assert re.search(r"┃\s+#\s+┃\s+id\s+┃\s+name\s+┃\s+score\s+┃", header), header
        # The description gives way first: left out below 100 columns, shown when the ids leave it room.
        assert (" description " in header) == (width >= longest + 17 + 9 + 23), header
    for hit in hits:
        score = f"{hit['score']:.4f}"
        assert any(hit["service_id"] in line and score in line and str(hit["rank"]) in line for line in lines), \
            f"{hit['service_id']} not whole on one line with its rank and score at {width}:\n{result.out}"


def test_a_description_stays_on_one_line(hits: list[dict], cli, monkeypatch):
    monkeypatch.setattr(console, "width", 160)
    out = cli("search", "convert 100 dollars to euros", "-m", "bm25", "--k", "5").out
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    described = [row for row in rows if row[4]]
    assert len(described) == 5 and all(row[0] for row in described), out   # the hit's first line only
    assert all(row[4].endswith("…") for row in described), out
