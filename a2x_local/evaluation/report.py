"""Markdown for one run and the side-by-side table of several (`a2x-local eval compare`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from a2x_local.errors import UserError
from a2x_local.evaluation.harness import SUMMARY_FILE
from a2x_local.jsonfiles import read_json


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def render_report(summary: dict[str, Any], plot_name: str | None = None) -> str:
    """The Markdown report of one run."""
    queries = summary["queries"]
    k = summary.get("k")
    lines = [f"# Evaluation: {summary['label']}", ""]
    lines += [f"- queries: {summary['spec']['queries_file']} ({queries['selected']} selected, "
              f"{queries['scored']} scored)",
              f"- registry: {summary['registry']['path']} ({summary['registry']['services']} services, "
              f"fingerprint {summary['registry']['fingerprint'][:12]})",
              f"- answer size: {'top ' + str(k) if k else 'what the method returns'}; "
              f"wall time {num(summary.get('wall_seconds'))} s", ""]
    lines += _table(
        ["hit", "comp", "recall", "precision", "F1", "tokens/query (prompt + completion)", "calls/query",
         "candidates shown/query", "latency p50 / p90 (ms)"],
        [[pct(summary["hit_rate"]), pct(summary.get("comp")), pct(summary["recall"]), pct(summary["precision"]),
          pct(summary["f1"]),
          f"{num(summary['tokens_per_query'], 0)} ({num(summary['prompt_tokens_per_query'], 0)} + "
          f"{num(summary['completion_tokens_per_query'], 0)})",
          num(summary["calls_per_query"], 2), num(summary["candidates_shown_per_query"]),
          f"{num(1000 * summary['latency_s']['p50'])} / {num(1000 * summary['latency_s']['p90'])}"]])
    ranked = summary.get("ranked")
    if ranked:
        cuts = list(ranked["at"].items())
        lines += ["", "## Ranked metrics", ""]
        header = ["", *(f"@{label}" + (f" (k={cut['k']})" if label.endswith("%") else "") for label, cut in cuts),
                  "MRR", "nDCG@10"]
        lines += _table(header, [
            ["hit", *(pct(cut["hit"]) for _, cut in cuts), pct(ranked["mrr"]), pct(ranked["ndcg@10"])],
            ["recall", *(pct(cut["recall"]) for _, cut in cuts), "", ""],
            ["comp", *(pct(cut.get("comp")) for _, cut in cuts), "", ""],
        ])
    lines += _size_lines(summary)
    lines += _decomposition_lines(summary.get("decomposition"))
    notes = []
    if queries["skipped_no_correct_in_registry"]:
        notes.append(f"{len(queries['skipped_no_correct_in_registry'])} queries have no correct service in the "
                     "registry; they were not run and are left out of every average: "
                     + ", ".join(queries["skipped_no_correct_in_registry"][:20]))
    if queries["with_missing_tools"]:
        policy = summary["spec"]["missing_tools"]
        notes.append(f"{queries['with_missing_tools']} queries name {len(queries['missing_tool_ids'])} services "
                     f"missing from the registry (policy '{policy}': "
                     + ("scored only against the services that exist)" if policy == "exclude"
                        else "the missing ones count as misses)"))
    if queries["errors"]:
        notes.append(f"{queries['errors']} queries ended in an error (scored as answered; a rerun retries them)")
    if summary.get("capped_answers"):
        notes.append(f"{summary['capped_answers']} model answers in {summary['queries_with_capped_answers']} queries"
                     " filled a cap smaller than the list offered ([search] max_children_selected /"
                     " max_services_selected): items beyond the cap may have been cut")
    if notes:
        lines += ["", "## Notes", "", *(f"- {note}" for note in notes)]
    if plot_name:
        lines += ["", f"![hit and recall versus k]({plot_name})"]
    return "\n".join(lines) + "\n"


def _size_lines(summary: dict[str, Any]) -> list[str]:
    """hit / recall / COMP for queries with one correct service and with two or more, at every cut-off."""
    groups = summary.get("by_size")
    if not groups:
        return []
    lines = ["", "## By correct-set size", "",
             "COMP = the whole correct set returned (COMP@k: within the top k). Ranked runs return k services each, "
             "so runs compared at the same cut-off are compared at the same budget.", ""]
    cuts = list(groups["single"].get("at", {}))
    header = ["correct services", "queries", "hit", "recall", "comp",
              *(f"{metric}@{label}" for label in cuts for metric in ("hit", "recall", "comp"))]
    rows = []
    for name, title in (("single", "one"), ("multi", "two or more")):
        group = groups[name]
        rows.append([title, str(group["queries"]), pct(group["hit"]), pct(group["recall"]), pct(group["comp"]),
                     *(pct(group["at"][label][metric]) for label in cuts for metric in ("hit", "recall", "comp"))])
    return lines + _table(header, rows)


def _decomposition_lines(block: dict[str, Any] | None) -> list[str]:
    if not block:
        return []
    plan, sizes = block["plan"], block["steps_per_query_by_size"]
    lines = ["", "## Decomposition", "",
             f"- steps per query {num(block['steps_per_query'], 2)} (one correct service: {num(sizes['single'], 2)};"
             f" two or more: {num(sizes['multi'], 2)}); {pct(block['multi_step_share'])}% of queries split",
             f"- the plan's own services ({num(plan['services_per_query'], 2)} per query): hit {pct(plan['hit'])}, "
             f"recall {pct(plan['recall'])}, comp {pct(plan['comp'])}",
             f"- SAD applied to {block['sad_applied']} queries; {block['sad_copy_rejected']} re-decompositions "
             "refused as copies of service names"]
    reference = block.get("reference")
    if reference:
        hits = ", ".join(f"@{k} {pct(value)}" for k, value in reference["step_hit"].items())
        lines.append(f"- against the reference steps of {reference['queries']} queries: DA {pct(reference['da'])}, "
                     f"DA±1 {pct(reference['da_pm1'])}; per-step hit {hits} ({reference['steps_scored']} steps)")
    return lines


def load_summary(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / SUMMARY_FILE
    if not Path(run_dir).is_dir():
        raise UserError(f"{run_dir}: no such run folder",
                        hint="give the folder `a2x-local eval` wrote (it prints it; see runs/)")
    if not path.is_file():
        raise UserError(f"{run_dir}: not a finished run (no {SUMMARY_FILE})",
                        hint="rerun the same `a2x-local eval` command to finish it")
    return read_json(path, hint="the run's summary is damaged: rerun the same `a2x-local eval` command with --fresh")


def unique_labels(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs with the same label (same method on two registries, say) get their folder name added."""
    counts: dict[str, int] = {}
    for summary in summaries:
        counts[summary["label"]] = counts.get(summary["label"], 0) + 1
    return [{**s, "label": f"{s['label']} [{Path(s['run_dir']).name}]"} if counts[s["label"]] > 1 else s
            for s in summaries]


COMPARE_COLUMNS = ("run", "queries", "k", "hit", "recall", "precision", "F1", "hit@1", "hit@5", "hit@10",
                   "hit@50", "recall@10", "recall@50", "comp@10", "multi comp@10", "MRR", "nDCG@10", "tokens/q",
                   "calls/q", "p50 ms")


def compare_row(summary: dict[str, Any]) -> dict[str, str]:
    at = summary.get("ranked", {}).get("at", {}) if summary.get("ranked") else {}
    ranked = summary.get("ranked") or {}

    def cut(label: str, metric: str) -> str:
        return pct(at[label].get(metric)) if label in at else "-"

    multi = (summary.get("by_size") or {}).get("multi") or {}
    multi_comp = pct(multi["at"]["10"]["comp"]) if multi.get("queries") and "10" in multi.get("at", {}) else "-"
    return {
        "run": summary["label"], "queries": str(summary["queries"]["scored"]), "k": str(summary.get("k") or "-"),
        "hit": pct(summary["hit_rate"]), "recall": pct(summary["recall"]), "precision": pct(summary["precision"]),
        "F1": pct(summary["f1"]), "hit@1": cut("1", "hit"), "hit@5": cut("5", "hit"), "hit@10": cut("10", "hit"),
        "hit@50": cut("50", "hit"), "recall@10": cut("10", "recall"), "recall@50": cut("50", "recall"),
        "comp@10": cut("10", "comp"), "multi comp@10": multi_comp, "MRR": pct(ranked.get("mrr")),
        "nDCG@10": pct(ranked.get("ndcg@10")),
        "tokens/q": num(summary["tokens_per_query"], 0), "calls/q": num(summary["calls_per_query"], 2),
        "p50 ms": num(1000 * summary["latency_s"]["p50"]),
    }


def render_compare(summaries: Sequence[dict[str, Any]], plots: Sequence[str] = ()) -> str:
    rows = [compare_row(summary) for summary in summaries]
    lines = ["# Comparison", "", *_table(COMPARE_COLUMNS, [[row[c] for c in COMPARE_COLUMNS] for row in rows])]
    lines += ["", *(f"![{Path(name).stem}]({name})" for name in plots)]
    return "\n".join(lines) + "\n"
