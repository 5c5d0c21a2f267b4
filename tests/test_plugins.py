"""Plug-ins through entry points (issue 35): a package installed beside a2x-local adds an engine (`a2x_local.engines`)
and a search method (`a2x_local.methods`), and the command line then offers and runs them. The package is written
here, with its dist-info (METADATA, entry_points.txt), into a folder put on the child's PYTHONPATH: what pip
leaves after installing a wheel."""

from __future__ import annotations

import json
import subprocess
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from a2x_local.components.plugins import ENGINE_GROUP, METHOD_GROUP, load_plugins
from a2x_local.search import method_names
from tests.support.paths import ROOT
from tests.support.processes import cli_command, tree_env
from tests.support.registries import make_registry
from tests.taxonomy.helpers import synthetic

PLUGIN = '''
"""A test plug-in: the engine writes what it was asked into $DEMO_MARKER; the method lists every service."""

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from a2x_local.db import connect
from a2x_local.registry import Registry
from a2x_local.search import Hit, MethodSpec, SearchAnswer, SearchMethod
from a2x_local.testing import ScriptedEngine


def engine_factory(model_ref, engine_config):
    def rule(request):
        with Path(os.environ["DEMO_MARKER"]).open("a", encoding="utf-8") as marker:
            marker.write(f"{model_ref.requested} {request.label}\\n")
        return "[]"

    return ScriptedEngine(rule)


class NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ListAll(SearchMethod):
    name = "demo-all"

    def __init__(self, ids):
        self.ids = ids

    def search_batch(self, requests):
        return [SearchAnswer(query=r.query, hits=[Hit(i, 1.0) for i in self.ids][: r.k or 10], ranked=True)
                for r in requests]


def make_list_all(settings, db_path, options, progress):
    with connect(db_path, mode="read") as con:
        return ListAll(sorted(service.id for service in Registry(con).all()))


SPEC = MethodSpec("demo-all", "every service (a test plug-in)", NoOptions, make_list_all, engine="none",
                  cost="retrieval")
'''


def install_plugin(folder: Path) -> Path:
    """The plug-in package and its dist-info in ``folder`` (a site-packages of its own)."""
    (folder / "a2x_demo_plugin").mkdir(parents=True)
    (folder / "a2x_demo_plugin" / "__init__.py").write_text(PLUGIN, encoding="utf-8")
    info = folder / "a2x_demo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: a2x-demo-plugin\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(textwrap.dedent(f"""\
        [{ENGINE_GROUP}]
        demo-engine = a2x_demo_plugin:engine_factory

        [{METHOD_GROUP}]
        demo-all = a2x_demo_plugin:SPEC
        """), encoding="utf-8")
    return folder


def test_an_installed_plugin_adds_an_engine_and_a_method_to_the_cli(tmp_path: Path):
    site = install_plugin(tmp_path / "site")
    db = make_registry(tmp_path / "r.duckdb", synthetic(["weather", "payments"], 3))
    marker = tmp_path / "asked.txt"
    env = tree_env(DEMO_MARKER=str(marker), A2X_HOME=str(tmp_path / "home"))
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cli_command(*args, "--db", str(db)), cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=600)

    listed = cli("search", "weather", "--method", "demo-all", "-k", "10", "--json")
    assert listed.returncode == 0, listed.stderr
    hits = json.loads(listed.stdout)["hits"]
    assert sorted(hit["service_id"] for hit in hits) == sorted(s.id for s in synthetic(["weather", "payments"], 3))
    # The plug-in engine answers an LLM method; its model is a name it takes as it is (no folder checked).
    full = cli("search", "weather", "--method", "full", "--engine", "demo-engine", "--model", "demo-model",
               "--json")
    assert full.returncode == 0, full.stderr
    assert marker.read_text(encoding="utf-8").split()[0] == "demo-model"
    # Without the plug-in on the path, neither name exists.
    del env["DEMO_MARKER"]
    env["PYTHONPATH"] = tree_env()["PYTHONPATH"]
    missing = cli("search", "weather", "--method", "demo-all", "--json")
    assert missing.returncode == 1 and "unknown search method 'demo-all'" in missing.stderr


def test_a_broken_or_clashing_plugin_is_skipped_with_one_line(caplog: pytest.LogCaptureFixture):
    points = {ENGINE_GROUP: [EntryPoint("demo-broken", "a2x_no_such_module:factory", ENGINE_GROUP)],
              METHOD_GROUP: [EntryPoint("bm25", "a2x_local.search.retrieval.methods:BM25_SPEC", METHOD_GROUP),
                             EntryPoint("dense-too", "a2x_local.search.retrieval.methods:DENSE_SPEC", METHOD_GROUP)]}
    problems = load_plugins(lambda group: points[group])
    assert len(problems) == 3 and all(line in caplog.text for line in problems)
    assert "demo-broken" in problems[0] and "a2x_no_such_module" in problems[0]
    assert "already exists" in problems[1] and "named 'dense-too' but its MethodSpec 'dense'" in problems[2]
    assert "dense-too" not in method_names()
