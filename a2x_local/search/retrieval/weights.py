"""The fusion weights a hybrid search uses: the `[retrieval]` defaults, a registry's tuned weights over them (when
they were tuned with the embedding model in use), and method options over both."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from a2x_local.search.retrieval.config import RetrievalConfig

FUSION_KEYS = ("dense_weight", "bm25_weight", "rrf_k")


@dataclass(frozen=True)
class FusionWeights:
    dense_weight: float
    bm25_weight: float
    rrf_k: float
    source: str          # "configuration", "registry" (tuned by `a2x-local eval tune`) or "options"
    note: str = ""

    def values(self) -> dict[str, float]:
        return {"dense_weight": self.dense_weight, "bm25_weight": self.bm25_weight, "rrf_k": self.rrf_k}

    def to_dict(self) -> dict[str, Any]:
        return {**self.values(), "source": self.source, **({"note": self.note} if self.note else {})}


def _valid(stored: dict[str, Any]) -> bool:
    values = [stored.get(key) for key in FUSION_KEYS]
    return (all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
            and values[0] >= 0 and values[1] >= 0 and values[0] + values[1] > 0 and values[2] > 0)


def fusion_weights(config: RetrievalConfig, stored: dict[str, Any] | None, model_identity: str,
                   given: Collection[str] = ()) -> FusionWeights:
    """Weights for one hybrid search. ``stored`` is the registry's tuned record; it applies only to the embedding
    model it was tuned with (another model ranks differently). ``given`` names the keys set by options: the
    values in ``config`` win for those."""
    base = {key: float(getattr(config, key)) for key in FUSION_KEYS}
    source, note = ("options" if given else "configuration"), ""
    if stored and _valid(stored):
        if stored.get("model") == model_identity:
            base.update({key: float(stored[key]) for key in FUSION_KEYS if key not in given})
            source = "registry" if set(FUSION_KEYS) - set(given) else "options"
            note = f"tuned on {stored.get('queries', '?')}"
        else:
            note = "the registry's tuned weights belong to another embedding model and are not used"
    return FusionWeights(base["dense_weight"], base["bm25_weight"], base["rrf_k"], source, note)
