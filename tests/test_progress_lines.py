"""Long commands say where they are when nobody watches a terminal (issue 33, item 3): `index`, `build` and `eval`
with stderr a pipe write a line per stage with its counts (and at least one every `$A2X_PROGRESS_EVERY_S`), and
nothing but the JSON reaches stdout."""

from __future__ import annotations

import io
import json
import re
import subprocess
import time

import pytest

from a2x_local.cli.progress_lines import LineProgress, line_interval
from a2x_local.errors import UserError
from tests.support.paths import ROOT
from tests.support.processes import cli_command, python_command, tree_env

SMALL = ROOT / "data" / "sample_small"
# `build` with the scripted word policy, registered as the engine "scripted" in the child process.
BUILD_SCRIPTED = """
import sys
from a2x_local.cli import main
from a2x_local.db import connect
from a2x_local.registry import Registry
from a2x_local.testing import ScriptedEngine, WordPolicy
from a2x_local.testing.engine import registered_engine

with connect(sys.argv[1]) as con:
    services = Registry(con).all()
with registered_engine("scripted", lambda config: ScriptedEngine(WordPolicy(services))):
    sys.argv = ["a2x-local", "build", "--engine", "scripted", "--model", "scripted", "--db", sys.argv[1], "--json"]
    main()
"""


def piped(command: list[str], home, every: str = "0") -> subprocess.CompletedProcess[str]:
    env = tree_env(A2X_HOME=str(home), A2X_PROGRESS_EVERY_S=every, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("A2X_DB", None)
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    json.loads(done.stdout)   # stdout holds the JSON only
    return done


def test_index_build_and_eval_write_stage_lines_with_counts_when_piped(tmp_path):
    db, home = str(tmp_path / "registry.duckdb"), tmp_path / "home"
    piped(cli_command("ingest", str(SMALL / "services.json"), "--db", db, "--json"), home)

    index = piped(cli_command("index", "--db", db, "--json"), home).stderr
    assert "index: embedding 54 services: started (54)" in index
    assert re.search(r"^index: embedding 54 services: 54/54, (\d+\.\d/s, )?\d+ s, done$", index, re.M), index
    assert "index: BM25 index: started\n" in index and re.search(r"^index: BM25 index: \d+ s, done$", index, re.M)

    build = piped(python_command(BUILD_SCRIPTED, db), home).stderr
    assert re.search(r"^build: level 0 · \w+ · 54 services: started$", build, re.M), build
    assert re.search(r"^build: level 0 · \w+ · 54 services: \d+/\d+ answers.* done$", build, re.M), build
    assert re.search(r"^build: rounds 1 · prompt tokens [\d,]+ · completion tokens [\d,]+$", build, re.M), build

    evaluation = piped(cli_command("eval", "--queries", str(SMALL / "queries.json"), "--method", "bm25", "--db", db,
                                   "--json", "--out", str(tmp_path / "eval")), home).stderr
    assert re.search(r"^eval: .*bm25.*: started \(20\)$", evaluation, re.M), evaluation
    assert re.search(r"^eval: .*bm25.*: 20/20, .*done$", evaluation, re.M), evaluation


def test_lines_keep_coming_while_nothing_reports():
    """A stage that reports nothing (a model loading) and the work between stages still get a line every interval."""
    out = io.StringIO()
    with LineProgress("index", every_s=0.1, stream=out) as lines:
        time.sleep(0.35)
        advance = lines.bar("embedding 10 services", 10)
        advance(3)
        time.sleep(0.35)
        advance(7)
    text = out.getvalue().splitlines()
    assert text[0].startswith("index: working, ")
    assert "index: embedding 10 services: started (10)" in text
    stage_lines = [line for line in text if line.startswith("index: embedding 10 services: 3/10")]
    assert len(stage_lines) >= 2, text
    assert text[-1].startswith("index: embedding 10 services: 10/10") and text[-1].endswith("done")


def test_the_interval_comes_from_the_environment():
    assert line_interval({}) == 30.0
    assert line_interval({"A2X_PROGRESS_EVERY_S": "5"}) == 5.0
    assert line_interval({"A2X_PROGRESS_EVERY_S": "off"}) is None
    with pytest.raises(UserError, match="A2X_PROGRESS_EVERY_S"):
        line_interval({"A2X_PROGRESS_EVERY_S": "soon"})
