"""Registries for tests: a ten-service registry whose right answers are obvious, the real ToolRet catalogue, and a
snapshot of everything an ingest could change (to prove that a failed one changed nothing)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import duckdb

from a2x_local.db import connect, transaction
from a2x_local.registry import Registry, Service
from tests.support.paths import TOOLRET


def _schema(*names: str) -> dict:
    return {"inputSchema": {"type": "object", "properties": {name: {"type": "string"} for name in names}}}


SERVICES = [
    Service("weather", "generic", "getWeatherForecast", "Get the weather forecast for a city for the coming days.",
            _schema("city", "days")),
    Service("currency", "generic", "convert_currency",
            "Convert an amount of money from one currency to another at today's exchange rate.",
            _schema("amount", "from_currency", "to_currency")),
    Service("flights", "generic", "searchFlights", "Search for airline flights between two airports on a date.",
            _schema("origin", "destination", "date")),
    Service("stocks", "generic", "get_stock_price", "Look up the latest share price for a stock ticker symbol."),
    Service("email", "generic", "sendEmail", "Send an email message to a recipient address."),
    Service("translate", "generic", "translate_text", "Translate a text from one language into another language."),
    Service("restaurants", "generic", "findRestaurants", "Find restaurants near a location, filtered by cuisine."),
    Service("calendar", "generic", "create_calendar_event", "Create a meeting or event in the user's calendar."),
    Service("hotels", "generic", "bookHotel", "Reserve a hotel room in a city for given check-in and check-out dates."),
    Service("news", "generic", "get_news_headlines", "Fetch the top news headlines about a topic."),
]


def make_registry(db_path: Path, services: Iterable[Service] = SERVICES) -> Path:
    """Create (or add to) the registry at ``db_path`` in one transaction; returns the path."""
    with connect(db_path) as con, transaction(con):
        Registry(con).insert(list(services))
    return db_path


def services_from(folder: Path, limit: int | None = None) -> list[Service]:
    """The services of a benchmark folder's services.json (data/toolret, data/toolret_zh), in file order."""
    data = json.loads((folder / "services.json").read_text(encoding="utf-8"))[:limit]
    return [Service(d["id"], d["type"], d["name"], d["description"], d.get("metadata", {})) for d in data]


@cache
def _toolret() -> tuple[Service, ...]:
    return tuple(sorted(services_from(TOOLRET), key=lambda s: s.id))


def toolret_services() -> list[Service]:
    """All 1,839 ToolRet services (data/toolret), in id order; read once per session."""
    return list(_toolret())


def snapshot(db_path: Path) -> tuple:
    """Everything an ingest could change: all service rows and all ingest runs."""
    if not db_path.exists():
        return ()
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        services = con.execute("SELECT * FROM services ORDER BY id").fetchall()
        runs = con.execute("SELECT * FROM ingest_runs ORDER BY id").fetchall()
    finally:
        con.close()
    return services, runs
