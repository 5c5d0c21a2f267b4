"""Search: every method (retrieval baselines, A2X descent, LLM baselines) behind one batch interface."""

from a2x_local.search.methods import (
    MethodSpec,
    make_method,
    make_retriever,
    method_names,
    method_spec,
    register_method,
)
from a2x_local.search.types import Hit, SearchAnswer, SearchMethod, SearchRequest

__all__ = [
    "Hit",
    "MethodSpec",
    "SearchAnswer",
    "SearchMethod",
    "SearchRequest",
    "make_method",
    "make_retriever",
    "method_names",
    "method_spec",
    "register_method",
]
