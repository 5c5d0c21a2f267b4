"""Search: every method (retrieval baselines in `retrieval/`, A2X descent and the LLM baselines in `llm/`) behind
one batch interface, registered by name. Everything else in this package is private to it."""

from a2x_local.search.llm.tree_api import descend_tree, tree_search
from a2x_local.search.methods import (
    MethodSpec,
    ProgressFactory,
    make_method,
    method_names,
    method_spec,
    parse_option_pairs,
)
from a2x_local.search.retrieval.indexing import build_indexes
from a2x_local.search.retrieval.similarity import DenseSimilarity, keyword_tokenizer, open_similarity
from a2x_local.search.retrieval.tuning import LabelledQuery, clear_fusion, tune_fusion
from a2x_local.search.types import Hit, SearchAnswer, SearchMethod, SearchRequest, check_queries

__all__ = [
    "DenseSimilarity",
    "Hit",
    "LabelledQuery",
    "MethodSpec",
    "ProgressFactory",
    "SearchAnswer",
    "SearchMethod",
    "SearchRequest",
    "build_indexes",
    "check_queries",
    "clear_fusion",
    "descend_tree",
    "keyword_tokenizer",
    "make_method",
    "method_names",
    "method_spec",
    "open_similarity",
    "parse_option_pairs",
    "tree_search",
    "tune_fusion",
]
