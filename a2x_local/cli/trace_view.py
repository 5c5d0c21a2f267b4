"""`search --trace`: an LLM method's walk as a rich tree (decisions per node, then each selection call)."""

from __future__ import annotations

from typing import Any

from rich.tree import Tree as RichTree

from a2x_local.cli.output import shown as escape
from a2x_local.search import SearchAnswer


def _node_label(node_id: str, names: dict[str, str], decision: dict[str, Any] | None, *, pruned: bool) -> str:
    name = escape(names.get(node_id, node_id))
    if pruned:
        return f"[dim]✗ {name}[/dim]"
    label = f"[green]✓ {name}[/green] [dim]{escape(node_id)}[/dim]"
    if decision is not None:
        answer = decision.get("answer")
        label += f"  answer [bold]{escape(answer)}[/bold]" if answer else ""
        if decision.get("fallback"):
            label += "  [yellow](nothing chosen: largest child)[/yellow]"
        if decision.get("capped"):
            label += "  [yellow](answer filled the cap: more may have fitted)[/yellow]"
        if decision.get("overselected"):
            kept = len(decision["selected"])
            label += (f"  [yellow](chose {kept + len(decision['overselected'])} of {len(decision.get('shown', []))}:"
                      f" too many, the first {kept} in the query's order expanded)[/yellow]")
        if decision.get("error"):
            label += f"  [red]{escape(decision['error'])}[/red]"
    return label


def _branch(parent: RichTree, node_id: str, names: dict[str, str], decisions: dict[str, dict[str, Any]],
            cut: frozenset[str] = frozenset()) -> None:
    if node_id in cut:
        parent.add(f"[yellow]… {escape(names.get(node_id, node_id))}: not searched, the query's budget was spent"
                   "[/yellow]")
        return
    decision = decisions.get(node_id)
    branch = parent.add(_node_label(node_id, names, decision, pruned=False))
    if decision is None:
        return
    for child in decision["selected"]:
        _branch(branch, child, names, decisions, cut)
    for child in decision["pruned"]:
        branch.add(_node_label(child, names, None, pruned=True))


def trace_tree(answer: SearchAnswer) -> RichTree:
    """The walk and the selection calls behind one answer (methods without a trace get a one-line tree)."""
    if answer.trace is None:   # a retrieval method: its title would only say "?, -, 0 rounds"
        return RichTree(f"[bold]{escape(answer.query)}[/bold]  [dim]no trace: this method makes no model"
                        " decisions[/dim]")
    trace, cost = answer.trace, answer.cost
    title = (f"[bold]{escape(answer.query)}[/bold]  [dim]{escape(str(trace.get('method', '?')))},"
             f" {escape(str(trace.get('mode', '-')))}, {cost.rounds} rounds, {cost.calls} calls,"
             f" {cost.prompt_tokens:,} prompt + {cost.completion_tokens:,} completion tokens[/dim]")
    root = RichTree(title)
    names: dict[str, str] = trace.get("names", {})
    decisions = {d["node"]: d for d in trace.get("decisions", [])}
    visited = trace.get("visited", [])
    cut = trace.get("budget_cut") or {}
    if visited:
        _branch(root.add("[bold]descent[/bold]"), visited[0], names, decisions, frozenset(cut.get("nodes", [])))
    if trace.get("retrieved"):
        root.add(f"[bold]retrieved[/bold] {escape(', '.join(trace['retrieved']))}")
    calls = trace.get("selection", [])
    if calls:
        selection = root.add("[bold]selection[/bold]")
        for call in calls:
            where = names.get(call["key"], call["key"])
            part = f" part {call['part']}/{call['parts']}" if call.get("parts", 1) > 1 else ""
            chosen = ", ".join(call["selected"]) or "none"
            line = (f"{escape(call['call'])} ({escape(call['mode'])}) over {escape(where)}{part}:"
                    f" {len(call['services'])} services → [green]{escape(chosen)}[/green]")
            if call.get("capped"):
                line += "  [yellow](capped)[/yellow]"
            if call.get("error"):
                line += f"  [red]{escape(call['error'])}[/red]"
            selection.add(line)
    if cut.get("lists"):
        root.add(f"[yellow]{len(cut['lists'])} lists not offered: the query's budget was spent[/yellow]")
    return root
