"""Search: every method (retrieval baselines in `retrieval/`, A2X descent and the LLM baselines in `llm/`) behind
one batch interface, registered by name. Everything else in this package is private to it."""

from a2x_local.search.flags import MethodFlags
from a2x_local.search.llm.descent import option_services
from a2x_local.search.llm.positions import NONE
from a2x_local.search.llm.tree_api import descend_tree, tree_search
from a2x_local.search.methods import (
    MethodSpec,
    ModeError,
    ProgressFactory,
    check_mode,
    make_method,
    make_retriever,
    method_names,
    method_options,
    method_spec,
    parse_option_pairs,
    register_method,
)
from a2x_local.search.retrieval.indexing import build_indexes, dense_index_choice
from a2x_local.search.retrieval.similarity import DenseSimilarity, keyword_tokenizer, open_similarity
from a2x_local.search.retrieval.tuning import LabelledQuery, clear_fusion, tune_fusion
from a2x_local.search.types import (
    MODES,
    Hit,
    Retriever,
    SearchAnswer,
    SearchCost,
    SearchMethod,
    SearchRequest,
    check_queries,
)

__all__ = [
    "MODES",
    "NONE",
    "DenseSimilarity",
    "Hit",
    "LabelledQuery",
    "MethodFlags",
    "MethodSpec",
    "ModeError",
    "ProgressFactory",
    "Retriever",
    "SearchAnswer",
    "SearchCost",
    "SearchMethod",
    "SearchRequest",
    "build_indexes",
    "check_mode",
    "check_queries",
    "clear_fusion",
    "dense_index_choice",
    "descend_tree",
    "keyword_tokenizer",
    "make_method",
    "make_retriever",
    "method_names",
    "method_options",
    "method_spec",
    "open_similarity",
    "option_services",
    "parse_option_pairs",
    "register_method",
    "tree_search",
    "tune_fusion",
]
