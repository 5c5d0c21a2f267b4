"""Search: every method (retrieval baselines in `retrieval/`, A2X descent and the LLM baselines in `llm/`) behind
one batch interface, registered by name. Everything else in this package is private to it."""

from a2x_local.search.methods import (
    ProgressFactory,
    make_method,
    method_names,
    method_spec,
    parse_option_pairs,
)
from a2x_local.search.retrieval.indexing import build_indexes
from a2x_local.search.retrieval.tuning import LabelledQuery, clear_fusion, tune_fusion
from a2x_local.search.types import SearchAnswer, SearchMethod, SearchRequest, check_queries

__all__ = [
    "LabelledQuery",
    "ProgressFactory",
    "SearchAnswer",
    "SearchMethod",
    "SearchRequest",
    "build_indexes",
    "check_queries",
    "clear_fusion",
    "make_method",
    "method_names",
    "method_spec",
    "parse_option_pairs",
    "tune_fusion",
]
