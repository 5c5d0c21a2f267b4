"""The one step table of a level (a2x_local/taxonomy/induction/steps.py): the builder runs whatever it lists, in its
order, and names no step itself, so a step is added in one place."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import a2x_local.taxonomy.induction.builder as builder_module
from a2x_local.taxonomy.induction import state as build_state
from a2x_local.taxonomy.induction.steps import STEP_ORDER, STEPS, Step
from tests.taxonomy.helpers import Recorder, build, small_config, synthetic
from tests.taxonomy.rules import DomainRule

BUILDER = Path(builder_module.__file__)
STATUSES = {"KEYWORDS", "DESIGN", "VALIDATE", "REDESIGN", "REFINE", "ASSIGN"}


def test_the_table_is_every_step_once_in_the_published_order():
    assert STEP_ORDER == ("keywords", "design", "validate", "redesign", "refine", "assign")
    assert {getattr(build_state, name) for name in STATUSES} == set(STEP_ORDER)
    assert len({step.name for step in STEPS}) == len(STEPS)


def test_the_builder_names_no_step():
    names = {node.id for node in ast.walk(ast.parse(BUILDER.read_text(encoding="utf-8"))) if isinstance(node, ast.Name)}
    assert not names & STATUSES, f"builder.py names steps itself: {sorted(names & STATUSES)}"


def test_a_step_added_to_the_table_is_run_by_the_builder(monkeypatch):
    """An audit step after assignment: the assign step hands its finished nodes to it, and the table entry is all
    the builder needs to run it (and to run it for every node, as one round's model-free work)."""
    audited: list[str] = []

    def hand_over(at, work):
        assign_after(at, work)
        if work.status == build_state.DONE:
            work.status = "audit"

    def audit(at, work):
        audited.append(work.node_id)
        work.status = build_state.DONE

    assign_after = STEPS[-1].after
    assert assign_after is not None
    table = (*STEPS[:-1], dataclasses.replace(STEPS[-1], after=hand_over),
             Step("audit", plan=lambda at, works: [], apply=lambda *args: None, after=audit))
    monkeypatch.setattr(builder_module, "STEPS", table)
    services = synthetic(["weather", "travel", "finance"], 12)
    rule = Recorder(DomainRule())
    state, _ = build(services, small_config(cross_domain=False), rule)
    split = [node_id for node_id, node in state.nodes.items() if node.children]
    assert split and sorted(audited) == sorted(split)
    assert state.tree().service_ids() == {service.id for service in services}
