"""Proof of the air gap: the CPU bundle installs into a fresh virtualenv inside a network namespace with only
loopback, and ingest -> index -> hybrid search -> compose run on the sample registry there; any attempt of any
Python process to look up or reach another host fails the test. Slow (minutes, ~3 GB installed): `-m slow`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.delivery.offline import Offline, network_namespace_or_skip
from tests.support.paths import SAMPLE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

LIST_INSTALLED = ("import importlib.metadata as m, json; "
                  "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_cpu_bundle_installs_and_runs_the_pipeline_with_no_network(cpu_bundle: Path, tmp_path: Path):
    network_namespace_or_skip()
    offline = Offline(tmp_path)

    # The guard works: a lookup of another host is logged (and fails: there is no network).
    probe = offline.run(sys.executable, "-c", "import socket; socket.getaddrinfo('pypi.org', 443)", check=False)
    assert probe.returncode != 0 and "pypi.org" in "".join(offline.attempts()), probe.stderr
    offline.log.unlink()

    subprocess.run(["sha256sum", "--check", "--quiet", "--strict", "SHA256SUMS"], cwd=cpu_bundle, check=True)
    bundle_id = (cpu_bundle / "BUNDLE_ID").read_text().strip()
    venv = tmp_path / "venv"
    offline.run("bash", cpu_bundle / "install.sh", venv)
    cli = venv / "bin" / "a2x-local"
    assert bundle_id in offline.run(cli, "--version").stdout

    db = tmp_path / "registry.duckdb"
    offline.run(cli, "ingest", SAMPLE, "--db", db)
    offline.run(cli, "index", "--db", db)
    answer = offline.json(cli, "search", "convert an amount between currencies", "--method", "hybrid", "--k", "5",
                          "--db", db)
    assert answer["hits"], answer
    plan = offline.json(cli, "compose", "find popular movies, then tell me where to stream them", "--decomposer",
                        "rule", "--method", "hybrid", "--db", db)
    assert plan["steps"] and all(step["choice"] for step in plan["steps"]), plan
    stats = offline.json(cli, "stats", "--db", db)
    assert stats["services"] == 333 and stats["software"]["bundle_id"] == bundle_id

    assert offline.attempts() == [], "network attempts during the offline run:\n" + "\n".join(offline.attempts())

    # The SBOM lists every installed package with its version and licence; the set is the tested environment's.
    installed = json.loads(offline.run(venv / "bin" / "python", "-c", LIST_INSTALLED).stdout)
    installed = {normalized(name): version for name, version in installed.items() if normalized(name) != "pip"}
    sbom = json.loads((cpu_bundle / "sbom.cdx.json").read_text())
    listed = {normalized(c["name"]): c["version"] for c in [sbom["metadata"]["component"], *sbom["components"]]}
    assert listed == installed
    assert all(c.get("licenses") for c in sbom["components"]), [c["name"] for c in sbom["components"]
                                                                if not c.get("licenses")]
    tested = {normalized(d.metadata["Name"]): d.version for d in metadata.distributions()}
    differs = {name: (version, tested.get(name)) for name, version in installed.items()
               if name != "a2x-local" and tested.get(name) != version}
    assert differs == {}, f"installed from the bundle vs the tested environment: {differs}"
