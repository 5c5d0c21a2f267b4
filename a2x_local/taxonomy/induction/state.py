"""The whole in-progress build as plain JSON-able data, checkpointed after every engine round.

Everything the next round depends on lives here (tree so far, per-node work, counters, usage), so a build killed
at any moment resumes from its last checkpoint and reaches the same tree as an uninterrupted run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from a2x_local.taxonomy.induction.repetition import cut_repetition
from a2x_local.taxonomy.types import ROOT_ID, Tree, TreeNode

STATE_VERSION = 1

# Per-node status while a level is being split: the step the node waits for (their order is the step table's,
# steps.STEPS), or where it ended: split (done) or left a leaf (unsplit).
KEYWORDS, DESIGN, VALIDATE, REDESIGN, ASSIGN, REFINE, DONE, UNSPLIT = (
    "keywords", "design", "validate", "redesign", "assign", "refine", "done", "unsplit")


@dataclass
class Draft:
    """A designed sub-category before it becomes a node (its id is given only when the node is finalised)."""

    name: str
    description: str
    decision_rule: str
    boundary: str
    keywords: list[str] = field(default_factory=list)

    @classmethod
    def from_answer(cls, answer: Any, state: BuildState | None = None) -> Draft:
        """A designed category as the model wrote it, each text on one line and cut where it starts repeating
        itself (counted in ``state``: repetition.py)."""
        def clean(text: str) -> str:
            return model_text(text, state)

        return cls(clean(answer.name), clean(answer.description), clean(answer.decision_rule),
                   clean(answer.boundary), list(dict.fromkeys(answer.keywords)))

    def same_text(self, other: Draft) -> bool:
        """Unchanged by a refine: the services filed under it may stay without being classified again."""
        return (self.name, self.description, self.decision_rule, self.boundary) == (
            other.name, other.description, other.decision_rule, other.boundary)


@dataclass
class NodeWork:
    """One node being split at the current level."""

    node_id: str
    path: str
    services: list[str]
    mode: str = "descriptions"               # or "keywords"
    status: str = DESIGN
    keywords: dict[str, list[str]] = field(default_factory=dict)
    vocabulary: list[list] = field(default_factory=list)      # [[keyword, services], ...] by frequency
    drafts: list[Draft] = field(default_factory=list)
    dimension: str = ""                      # the classification axis the last design or refine stated
    flagged: dict[str, list[str]] = field(default_factory=dict)  # "position" -> violations (root validation)
    validations: int = 0
    assignment: dict[str, list[int]] = field(default_factory=dict)  # service -> 1-based draft positions
    pending: list[str] = field(default_factory=list)
    # After a refine added or changed categories: services filed under unchanged ones, to be offered the new
    # ones (``new_positions``, 1-based in ``drafts``) in the next assignment round.
    offer_new: list[str] = field(default_factory=list)
    new_positions: list[int] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    passes: int = 0
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["drafts"] = [dict(d.__dict__) for d in self.drafts]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeWork:
        data = dict(data)
        data["drafts"] = [Draft(**d) for d in data.get("drafts", [])]
        return cls(**data)


@dataclass
class BuildState:
    """Tree so far, the level in progress and everything counted."""

    nodes: dict[str, TreeNode]
    root_id: str = ROOT_ID
    phase: str = "split"                    # split | cross_pick | cross_place | done
    level: int = 0
    queue: list[str] = field(default_factory=list)      # nodes to split at the next level
    work: dict[str, NodeWork] = field(default_factory=dict)
    cross_done: bool = False
    cross_picks: list[list[str]] = field(default_factory=list)   # [service, from leaf, target domain]
    rounds: list[dict[str, Any]] = field(default_factory=list)   # one entry per step that called the engine
    counters: dict[str, int] = field(default_factory=dict)
    vocabulary: list[dict[str, Any]] = field(default_factory=list)
    # What the build could not do as designed: prompts shrunk to fit the context window, steps skipped because
    # nothing fits. Recorded with the build (never silent).
    events: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    wall_seconds: float = 0.0
    # What the model name resolved to when the build started (llm's `model_identity`): what a resume must match.
    model_identity: dict[str, str] = field(default_factory=dict)
    version: int = STATE_VERSION

    @classmethod
    def start(cls, service_ids: list[str], *, root_name: str = "All services") -> BuildState:
        root = TreeNode(ROOT_ID, None, 0, root_name, "Every service of the registry.")
        root.services = list(service_ids)
        return cls(nodes={ROOT_ID: root}, queue=[ROOT_ID])

    def count(self, key: str, amount: int = 1) -> None:
        if amount:
            self.counters[key] = self.counters.get(key, 0) + amount

    def event(self, step: str, node: str, what: str, **details: Any) -> None:
        """Record something the build did differently from its design (shrunk, skipped), and count it."""
        self.events.append({"step": step, "node": node, "level": self.level, "what": what, **details})
        self.count(f"{step}_{what}")

    def tree(self, registry_fingerprint: str = "") -> Tree:
        return Tree(nodes=self.nodes, registry_fingerprint=registry_fingerprint, root_id=self.root_id)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        # Shallow copies are enough: the JSON encoder reads them at once (asdict's deep walk costs ~10x more).
        data["nodes"] = {node_id: dict(node.__dict__) for node_id, node in self.nodes.items()}
        data["work"] = {node_id: work.to_dict() for node_id, work in self.work.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BuildState:
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"checkpoint format {data.get('version')} is not {STATE_VERSION}")
        data = dict(data)
        data["nodes"] = {node_id: TreeNode(**node) for node_id, node in data["nodes"].items()}
        data["work"] = {node_id: NodeWork.from_dict(w) for node_id, w in data["work"].items()}
        return cls(**data)


def model_text(text: Any, state: BuildState | None = None) -> str:
    """Text a model wrote, on one line, cut where it starts repeating itself; each cut counted in ``state``."""
    kept, cut = cut_repetition(str(text))
    if cut and state is not None:
        state.count("repeated_text_cut")
    return kept
