"""An upgrade across the air gap: a bundle built at an earlier commit (before the registry kept its software
history) is installed and serves a tree; the current bundle installed over it keeps the registry, runs its
migration, keeps the same tree active, and every search answers exactly as before (hybrid, and the A2X descent
with the tiny random model on the transformers engine, greedy, under the `lean` preset: the search defaults of that
commit). No network. Slow: `-m slow`."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from a2x_local.db import migrations
from tests.delivery.offline import Offline, network_namespace_or_skip, run_bundle
from tests.support.paths import ROOT, SAMPLE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

# The last commit before offline bundles: its registry schema has 3 migrations and no software history.
OLD_COMMIT = "126173bd66b5ad1b97c44960a6a3ffb4c901a76c"
QUERIES = ["convert an amount between currencies", "send an email to a customer", "find popular movies"]


def old_checkout(where: Path) -> Path:
    clone = subprocess.run(["git", "clone", "--quiet", "--shared", "--no-checkout", str(ROOT), str(where)],
                           capture_output=True, text=True)
    checkout = subprocess.run(["git", "-C", str(where), "checkout", "--quiet", OLD_COMMIT], capture_output=True,
                              text=True) if clone.returncode == 0 else clone
    if checkout.returncode != 0:
        pytest.skip(f"commit {OLD_COMMIT[:10]} is not in this clone (shallow?): {checkout.stderr.strip()[:200]}")
    return where


def tree_by_type(services: list[dict]) -> dict:
    """A two-level tree: one category per service type, split into parts of 25 services."""
    by_type: dict[str, list[str]] = defaultdict(list)
    for service in sorted(services, key=lambda s: s["id"]):
        by_type[service["type"]].append(service["id"])
    children = []
    for kind, ids in sorted(by_type.items()):
        parts = [ids[i:i + 25] for i in range(0, len(ids), 25)]
        node: dict = {"name": kind, "description": f"Services of type {kind}."}
        if len(parts) == 1:
            node["services"] = ids
        else:
            node["children"] = [{"name": f"{kind} {n}", "description": f"Part {n} of the {kind} services.",
                                 "services": part} for n, part in enumerate(parts, start=1)]
        children.append(node)
    return {"format": "a2x-tree", "version": 1,
            "root": {"name": "All", "description": "Every service.", "children": children}}


def hit_id(hit: dict) -> str:
    """A search hit's service id: `service_id` since the CLI named it as the API does, `id` in older versions."""
    return hit["service_id"] if "service_id" in hit else hit["id"]


def answers(offline: Offline, cli: Path, db: Path, tiny: Path, *a2x_options: str) -> dict:
    """Every search answer the registry gives: the hybrid hits, the A2X descent's hits and decisions (not its cost
    fields, which later versions report more of), and the active tree."""
    found = {}
    for query in QUERIES:
        hybrid = offline.json(cli, "search", query, "--method", "hybrid", "--k", "5", "--db", db)
        found[f"hybrid: {query}"] = [hit_id(hit) for hit in hybrid["hits"]]
    a2x = offline.json(cli, "search", QUERIES[0], "--method", "a2x", "--model", tiny, "--engine", "transformers",
                       "--dtype", "float32", "--db", db, *a2x_options)
    found["a2x"] = {"hits": [hit_id(hit) for hit in a2x["hits"]], "decisions": a2x["trace"]["decisions"]}
    found["active tree"] = [row["id"] for row in offline.json(cli, "tree", "list", "--db", db) if row["active"]]
    return found


def test_upgrade_from_an_older_bundle_keeps_the_registry_and_its_answers(cpu_bundle: Path, tmp_path: Path):
    network_namespace_or_skip()
    old_source = old_checkout(tmp_path / "old-source")
    old_bundle = tmp_path / "old-bundle"
    run_bundle("--target", "cpu", "--reuse", str(cpu_bundle), "--source", str(old_source), "--out", str(old_bundle))
    old_id, new_id = ((b / "BUNDLE_ID").read_text().strip() for b in (old_bundle, cpu_bundle))
    assert OLD_COMMIT[:10] in old_id and old_id != new_id

    offline = Offline(tmp_path)
    venv, db, tiny = tmp_path / "venv", tmp_path / "registry.duckdb", tmp_path / "tiny"
    cli = venv / "bin" / "a2x-local"
    offline.run("bash", old_bundle / "install.sh", venv)
    assert offline.run(cli, "--version").stdout.strip() == "a2x-local 0.1.0"  # no provenance before this work
    offline.run(cli, "ingest", SAMPLE, "--db", db)
    offline.run(cli, "index", "--db", db)
    services = offline.json(cli, "services", "list", "--limit", "0", "--db", db)
    tree_file = tmp_path / "tree.json"
    tree_file.write_text(json.dumps(tree_by_type(services)))
    offline.run(cli, "tree", "import", tree_file, "--db", db)
    offline.run(cli, "models", "make-tiny", tiny)
    before = answers(offline, cli, db, tiny)
    assert before["active tree"] and before["a2x"]["decisions"], before

    upgrade = offline.run("bash", cpu_bundle / "install.sh", venv, "--registry", db)
    assert new_id in upgrade.stdout
    assert (tmp_path / f"registry.duckdb.before-{new_id}").is_file()
    assert new_id in offline.run(cli, "--version").stdout
    stats = offline.json(cli, "stats", "--db", db)
    assert stats["services"] == 333 and stats["software"]["bundle_id"] == new_id
    history = stats["software_history"]
    assert [row["software"] for row in history[:3]] == [None, None, None]  # the old install's migrations 1-3
    latest = migrations()[-1][0]  # the upgrade applies every migration added since that commit, in one step
    assert (history[3]["bundle_id"], history[3]["schema_from"], history[3]["schema_to"]) == (new_id, 3, latest)

    # The search's default presentation changed since that commit (issue 27: the published lines in cache-stable
    # lists); its old defaults are the `lean` preset now, under which every answer must be the same.
    # Later versions add fields to each decision (issue 31: the options `shown`, the `overselected` guard); the
    # fields the old version reported must hold the same values.
    after = answers(offline, cli, db, tiny, "--preset", "lean")
    new_fields = {"shown", "overselected"}
    new_decisions, old_decisions = after["a2x"]["decisions"], before["a2x"]["decisions"]
    assert len(new_decisions) == len(old_decisions), (new_decisions, old_decisions)
    assert all(new_fields <= set(decision) for decision in new_decisions)
    after["a2x"]["decisions"] = [{key: new.get(key) for key in old}
                                 for new, old in zip(new_decisions, old_decisions, strict=True)]
    assert after == before
    assert answers(offline, cli, db, tiny)["a2x"]["decisions"]  # and the new default runs on the upgraded registry
    assert offline.attempts() == [], "network attempts:\n" + "\n".join(offline.attempts())
