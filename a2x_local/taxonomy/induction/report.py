"""The numbers a build records and prints: tree shape, rounds, requests per round, counters, vocabulary sizes."""

from __future__ import annotations

import json
import statistics
from typing import Any

from a2x_local.llm import Usage
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.state import BuildState
from a2x_local.taxonomy.types import Tree


def build_report(state: BuildState, tree: Tree, config: BuildConfig, usage: Usage) -> dict[str, Any]:
    """Everything `tree stats` shows for a built tree, as JSON-able data."""
    requests = [entry["requests"] for entry in state.rounds]
    oversized = [{"node": leaf.id, "depth": leaf.depth, "services": len(leaf.services)}
                 for leaf in tree.leaves()
                 if leaf.id != tree.root_id and len(leaf.services) > config.leaf_max_services]
    return {
        # Through JSON, so the report equals what the database stores (depth keys become strings).
        "tree": json.loads(json.dumps(tree.stats().to_dict())),
        "one_level": not tree.root.children,
        "engine_rounds": usage.rounds,
        "steps": len(state.rounds),
        "requests_per_round": {
            "mean": round(statistics.fmean(requests), 1) if requests else 0.0,
            "max": max(requests, default=0),
        },
        "rounds": state.rounds,
        "leaves_over_limit": sorted(oversized, key=lambda x: -x["services"]),
        "counters": dict(sorted(state.counters.items())),
        "vocabulary": state.vocabulary,
        "events": state.events,
        "usage": usage.to_dict(),
        "wall_seconds": round(state.wall_seconds, 2),
    }


def summary_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Label/value pairs for the summary table printed at the end of a build."""
    tree = report["tree"]
    total = report["usage"]["total"]
    rows = [
        ("services", f"{tree['services']:,}"),
        ("depth", str(tree["depth"])),
        ("internal nodes / leaves", f"{tree['internal_nodes']} / {tree['leaves']}"),
        ("leaf size mean / std / max", f"{tree['leaf_size_mean']} / {tree['leaf_size_std']} / "
                                       f"{tree['leaf_size_max']} ({tree['largest_leaf']})"),
        ("root fan-out", str(tree["root_fanout"])),
        ("services on several leaves", f"{tree['services_on_several_leaves']:,}"),
        ("leaves per service (mean)", str(tree["mean_leaves_per_service"])),
        ("services held by internal nodes", f"{tree['services_on_internal_nodes']:,}"),
        ("engine rounds", str(report["engine_rounds"])),
        ("requests per round (mean / max)",
         f"{report['requests_per_round']['mean']} / {report['requests_per_round']['max']}"),
        ("prompt / completion tokens", f"{total['prompt_tokens']:,} / {total['completion_tokens']:,}"),
    ]
    if total.get("cached"):
        rows.append(("answers from the cache (prompt tokens saved)",
                     f"{total['cached']:,} ({total['cached_prompt_tokens']:,})"))
    rows.append(("failed answers", f"{total['failures']:,}"))
    # A model that writes on: answers cut off at their token budget (each retried once with a larger one), and
    # texts it kept repeating, cut where the repetition starts (repetition.py).
    if total.get("truncated"):
        rows.append(("attempts cut off at their token budget", f"{total['truncated']:,}"))
    if report["counters"].get("repeated_text_cut"):
        rows.append(("texts cut where they repeated themselves", f"{report['counters']['repeated_text_cut']:,}"))
    rows.append(("wall time", f"{report['wall_seconds']:.1f} s"))
    for vocab in report["vocabulary"]:
        rows.append((f"keywords at {vocab['node']}",
                     f"{vocab['raw']} raw → {vocab['stemmed']} stemmed → {vocab['affixed']} affixes merged →"
                     f" {vocab['merged']} merged"))
    for kind in ("shrunk", "skipped"):
        events = [e for e in report["events"] if e["what"] == kind]
        if events:
            where = ", ".join(f"{e['step']} at {e['node']}" for e in events[:3]) + (" …" if len(events) > 3 else "")
            rows.append((f"steps {kind} to fit the context window" if kind == "shrunk"
                         else "steps skipped: nothing fits the context window", f"{len(events)} ({where})"))
    if report["leaves_over_limit"]:
        largest = report["leaves_over_limit"][0]
        rows.append(("leaves over θ_leaf", f"{len(report['leaves_over_limit'])} (largest {largest['node']}:"
                                           f" {largest['services']} at depth {largest['depth']})"))
    return rows
