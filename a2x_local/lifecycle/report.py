"""The nightly job's report: one JSON file per run, written atomically, and its lines for people."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from a2x_local.outfiles import write_output


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Write ``report`` to ``path`` whole or not at all (a monitor never reads half a file); only a regular file or
    a new path is written (`outfiles`)."""
    write_output(path, json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n", what="nightly report")


def summary_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Label/value pairs of what the job did, for the table `a2x-local nightly` prints."""
    rows = [("status", f"{report['status']} (exit code {report['exit_code']})")]
    sync = report.get("sync")
    if sync:
        rows.append(("sync", f"added {sync['added']:,}, updated {sync['updated']:,}, removed"
                             f" {sync['removed']:,}, unchanged {sync['unchanged']:,}"))
    if report.get("action"):
        rows.append(("action", f"{report['action']}: {report.get('reason', '')}"))
    update = report.get("update")
    if update:
        rows.append(("placement", f"{len(update['placed']):,} placed by {update['placement']}; "
                                  f"{len(update['changes']['removed']):,} taken out; re-split {len(update['resplit'])}"
                                  f" leaves"))
    if report.get("candidate") is not None:
        rows.append(("new tree", str(report["candidate"])))
    gate = report.get("gate")
    if gate and "drop" in gate:
        verdict, sign = ("passed", "≤") if gate["passed"] else ("refused", ">")
        rows.append(("gate", f"{verdict}: hit {gate['candidate_hit']:.1f}% (tree {gate['candidate']}) vs"
                             f" {gate['active_hit']:.1f}% (tree {gate['active']}), drop {gate['drop']:.1f} {sign}"
                             f" {gate['max_drop']:.1f} allowed"))
    elif gate:
        rows.append(("gate", gate.get("skipped", "")))
    rows.append(("active tree", f"{_tree(report, 'active_before')} → {_tree(report, 'active_after')}"))
    retention = report.get("retention")
    if retention:
        rows.append(("retention", f"kept {retention['kept']}, deleted {retention['deleted'] or 'none'}"))
    total = (report.get("usage") or {}).get("total", {})
    if total:
        rows.append(("model calls", f"{total.get('calls', 0):,} sent ({total.get('prompt_tokens', 0):,} prompt"
                                    f" tokens), {total.get('cached', 0):,} from the cache"
                                    f" ({total.get('cached_prompt_tokens', 0):,} prompt tokens saved)"))
    if report.get("error"):
        rows.append(("error", report["error"]["message"]))
    rows.append(("wall time", f"{report.get('wall_seconds', 0):.1f} s"))
    return rows


def _tree(report: dict[str, Any], key: str) -> str:
    """A tree id of the report: "none" when no tree was active, "unknown" when the job could not read it."""
    if key not in report:
        return "unknown"
    return "none" if report[key] is None else str(report[key])
