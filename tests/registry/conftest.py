"""Fixtures for registry tests: an isolated home, a database path, and a CLI runner."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from a2x_local.cli import run

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("A2X_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("A2X_DB", raising=False)
    return tmp_path / "registry.duckdb"


@pytest.fixture
def cli(db_path: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run `a2x-local ARGS --db db_path` in-process and capture its exit code and output."""

    def invoke(*args: str, db: bool = True) -> CliResult:
        capsys.readouterr()
        argv = [str(a) for a in args] + (["--db", str(db_path)] if db else [])
        code = run(argv)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke


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
