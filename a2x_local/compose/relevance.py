"""The relevance of a step to a service as SkillWeaver scores it (Eq. 4's sim: the bi-encoder's cosine), how far
that cosine stands out, and what a step's confidence is.

A cosine alone is no confidence: all-MiniLM-L6-v2 gives a good match 0.5 and multilingual-e5 gives everything 0.8.
So each step text is also compared with a fixed sample of the registry (its background), and a candidate's ``z`` is
how many standard deviations its cosine stands above that background. The retrieval evidence of a choice is
``logistic((z - confidence_z) / confidence_scale)``; compatibility with the services chosen before adds to it
(``r + (1 - r) * (1 - alpha) * compatibility``: a choice that fits the plan is likelier right, one that does not is
no likelier wrong, since unrelated steps have unrelated services). Below ``low_confidence`` a step is flagged.
The registry probes of the rule decomposer use the same measure: a probe is confident when its best service's z
reaches ``confidence_z``. A registry of fewer than `BACKGROUND_MIN` services cannot make a background of its own
(with ten services no cosine stands three deviations out), so it is padded with service texts shipped in
``background.txt`` (publicMCP servers), encoded once by the registry's model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from importlib import resources

import numpy as np

from a2x_local.compose.rules import ProbeResult
from a2x_local.search import DenseSimilarity

BACKGROUND_MIN = 256    # services a background needs; smaller registries are padded from background.txt


def background_texts() -> list[str]:
    """The shipped background service texts (``name: description``, one a line)."""
    text = (resources.files("a2x_local.compose") / "background.txt").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


@dataclass(frozen=True)
class Evidence:
    """A candidate's cosine with its step, and its standing above the step's background (None: not measured)."""

    cosine: float | None = None
    z: float | None = None


@dataclass(frozen=True)
class Confidence:
    """How a step's confidence is computed (`[compose] confidence_z`, `confidence_scale`, `low_confidence`)."""

    z: float = 4.0
    scale: float = 1.0
    threshold: float = 0.5

    def retrieval(self, z: float) -> float:
        return 1.0 / (1.0 + math.exp(-(z - self.z) / self.scale))

    def of(self, z: float | None, compatibility: float | None, alpha: float, at_least: float = 0.0) -> float | None:
        """The confidence of a choice: its retrieval evidence (at least ``at_least``: 1/n for a service the step
        names among n named ones), raised by its compatibility with the plan."""
        if z is None:
            return None
        evidence = max(self.retrieval(z), at_least)
        if compatibility is None:
            return evidence
        return evidence + (1 - evidence) * (1 - alpha) * compatibility


class Relevance:
    """Cosines, backgrounds and registry probes from the registry's dense model (one encode per text)."""

    def __init__(self, similarity: DenseSimilarity, confidence: Confidence, probe_depth: int = 5) -> None:
        self.similarity = similarity
        self.confidence = confidence
        self.probe_depth = probe_depth

    @property
    def model(self) -> str:
        return self.similarity.model

    @cached_property
    def padding(self) -> np.ndarray | None:
        """Shipped service vectors that fill a small registry's background up to `BACKGROUND_MIN`."""
        missing = BACKGROUND_MIN - self.similarity.size
        return self.similarity.encode_passages(background_texts()[:missing]) if missing > 0 else None

    def probe(self, texts: Sequence[str]) -> list[ProbeResult]:
        """The best services of each text and whether the first stands out (the rule decomposer's question)."""
        tops = self.similarity.top(texts, self.probe_depth)
        backgrounds = self.similarity.background(texts, self.padding)
        return [ProbeResult(tuple(service_id for service_id, _ in top),
                            bool(top) and background.z(top[0][1]) >= self.confidence.z)
                for top, background in zip(tops, backgrounds, strict=True)]

    def alike(self, texts: Sequence[str]) -> list[list[float]]:
        """The cosine of every pair of ``texts`` (the steps of one plan)."""
        return self.similarity.alike(texts) if texts else []

    def evidence(self, texts: Sequence[str], ids: Sequence[Sequence[str]]) -> list[list[Evidence]]:
        """For every text, the cosine and z of each of its candidates."""
        if not texts:
            return []
        cosines = self.similarity.cosines(texts, ids)
        backgrounds = self.similarity.background(texts, self.padding)
        return [[Evidence(value, None if value is None else round(background.z(value), 4)) for value in row]
                for row, background in zip(cosines, backgrounds, strict=True)]
