"""Local models: LLM engines behind one batch-first interface with structured outputs and token accounting, chosen
by name from a registry, the model aliases and checks, and the embedding models. Everything else in this package is
private to it."""

from a2x_local.llm.accounting import Usage
from a2x_local.llm.base import Engine, prompt_tokens_bound
from a2x_local.llm.cache import AnswerCache, CacheConfig, with_answer_cache
from a2x_local.llm.config import EngineName
from a2x_local.llm.constraints import STRUCTURED_BACKENDS
from a2x_local.llm.embedding import (
    BUILTIN_MINILM,
    EmbeddingAlias,
    EmbeddingModel,
    load_embedder,
    load_embedding_model,
    load_query_embedder,
    resolve_embedding,
    resolve_embedding_model,
)
from a2x_local.llm.engines import ENGINE_NAMES, register_engine, unregister_engine
from a2x_local.llm.factory import check_ref, engine_settings, make_engine
from a2x_local.llm.gguf_import import IMPORT_DTYPES
from a2x_local.llm.model_check import ModelCheck
from a2x_local.llm.model_import import ImportOutcome, import_alias, import_file
from a2x_local.llm.models import ALIASES_FILE, alias_path, load_aliases, model_identity
from a2x_local.llm.options import ENGINE_OPTION_NAMES, EngineOptions
from a2x_local.llm.packaged_models import ensure_model
from a2x_local.llm.sanitize import as_data, clip
from a2x_local.llm.startup_log import send_startup_output_to
from a2x_local.llm.tiny_model import build_tiny_model
from a2x_local.llm.tokens import count_text_tokens, truncate_to_tokens
from a2x_local.llm.types import Constraint, JsonConstraint, Message, RawOutput, RegexConstraint, Request, Result

__all__ = [
    "ALIASES_FILE",
    "BUILTIN_MINILM",
    "ENGINE_NAMES",
    "ENGINE_OPTION_NAMES",
    "IMPORT_DTYPES",
    "STRUCTURED_BACKENDS",
    "AnswerCache",
    "CacheConfig",
    "Constraint",
    "EmbeddingAlias",
    "EmbeddingModel",
    "Engine",
    "EngineName",
    "EngineOptions",
    "ImportOutcome",
    "JsonConstraint",
    "Message",
    "ModelCheck",
    "RawOutput",
    "RegexConstraint",
    "Request",
    "Result",
    "Usage",
    "alias_path",
    "as_data",
    "build_tiny_model",
    "check_ref",
    "clip",
    "count_text_tokens",
    "engine_settings",
    "ensure_model",
    "import_alias",
    "import_file",
    "load_aliases",
    "load_embedder",
    "load_embedding_model",
    "load_query_embedder",
    "make_engine",
    "model_identity",
    "prompt_tokens_bound",
    "register_engine",
    "resolve_embedding",
    "resolve_embedding_model",
    "send_startup_output_to",
    "truncate_to_tokens",
    "unregister_engine",
    "with_answer_cache",
]
