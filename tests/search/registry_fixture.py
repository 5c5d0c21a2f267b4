"""A ten-service registry whose right answers are obvious, shared by the search and evaluation tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from a2x_local.db import connect, transaction
from a2x_local.registry import Registry, Service
from a2x_local.settings import Settings, load_settings


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


def make_registry(db_path: Path, services: Sequence[Service] = SERVICES) -> Path:
    """Create (or add to) the registry at ``db_path``."""
    with connect(db_path) as con, transaction(con):
        Registry(con).insert(list(services))
    return db_path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty A2X_HOME, so no user configuration leaks into a test."""
    monkeypatch.setenv("A2X_HOME", str(tmp_path / "home"))
    for name in ("A2X_DB", "A2X_CONFIG", "A2X_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "home"


@pytest.fixture
def db_path(tmp_path: Path, home: Path) -> Path:
    return make_registry(tmp_path / "registry.duckdb")


@pytest.fixture
def settings(db_path: Path) -> Settings:
    return load_settings(db=db_path)
