"""A BERT sentence encoder in NumPy: the built-in all-MiniLM-L6-v2 (and any folder shaped like it) without torch.

Why: a server's first hybrid search needs one query vector, and importing sentence-transformers (torch,
transformers, scikit-learn, SciPy) takes 5 s of one core and more on a busy machine, where the same weights run in
NumPy after a 0.3 s import. The forward pass is BERT's (word, position and token-type embeddings, post-norm
self-attention layers with exact GELU), followed by the mean pooling and normalisation sentence-transformers applies;
tests/search/test_bert_numpy.py checks its vectors against sentence-transformers'. Only queries go through it:
services are embedded by sentence-transformers (in batches, where torch is faster). A folder this module does not
recognise exactly (another architecture, pooling or activation) gets None from `numpy_encoder`, and the caller
falls back to sentence-transformers.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from a2x_local.errors import A2XError
from a2x_local.llm.length_batches import length_batches

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"
_MASKED = np.finfo(np.float32).min    # what transformers adds to the attention scores of padding


def _read(path: Path) -> Any:
    """A model file's JSON, read as every input file is (regular, bounded: `jsonfiles.read_json`)."""
    from a2x_local.jsonfiles import read_json

    return read_json(path, what="embedding model file")


def _plain_bert(folder: Path) -> tuple[dict[str, Any], int, bool] | None:
    """(the model's config, its max sequence length, whether vectors are normalised) when the folder is a BERT
    encoder with mean pooling and nothing else; None otherwise."""
    try:
        modules = _read(folder / "modules.json")
        kinds = [module.get("type") for module in modules]
        if kinds not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE]) or modules[0].get("path"):
            return None
        config = _read(folder / "config.json")
        pooling = _read(folder / str(modules[1].get("path") or "") / "config.json")
        bert = _read(folder / "sentence_bert_config.json")
    except (A2XError, OSError, ValueError, AttributeError, TypeError):  # unreadable, or not what ST writes
        return None
    modes = {key for key, value in pooling.items() if key.startswith("pooling_mode_") and value}
    files = all((folder / name).is_file() for name in ("model.safetensors", "tokenizer.json"))
    if modes != {"pooling_mode_mean_tokens"} or bert.get("do_lower_case") or not files:
        return None
    if (config.get("model_type"), config.get("hidden_act"), config.get("position_embedding_type", "absolute")) != (
            "bert", "gelu", "absolute"):
        return None
    limit = int(bert.get("max_seq_length") or config.get("max_position_embeddings", 512))
    return config, min(limit, int(config.get("max_position_embeddings", 512))), kinds[-1] == _NORMALIZE


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to within 1.2e-7 (Numerical Recipes' erfc by Chebyshev fit): NumPy has none, SciPy costs 0.5 s to
    import."""
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    erfc = t * np.exp(poly)
    return np.where(x >= 0, 1.0 - erfc, erfc - 1.0).astype(x.dtype, copy=False)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.float32(math.sqrt(2.0))))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(variance + np.float32(eps)) * weight + bias


class NumpyBert:
    """The encoder of one folder (see the module's docstring): ``encode`` gives normalised float32 vectors."""

    def __init__(self, folder: Path, config: dict[str, Any], max_length: int, normalize: bool) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self._lock = threading.Lock()     # a tokenizer shared by threads raises "Already borrowed"
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_length)
        weights = load_file(str(folder / "model.safetensors"))
        # Linear weights are stored transposed once, so every product is one contiguous 2-D BLAS call.
        self.w = {name.removeprefix("bert."): np.ascontiguousarray(
            value.T if value.ndim == 2 and ".embeddings." not in f".{name}" else value, dtype=np.float32)
            for name, value in weights.items() if value.dtype.kind == "f"}
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.normalize = normalize
        self.dimension = int(config["hidden_size"])
        missing = [name for name in self._needed() if name not in self.w]
        if missing:
            raise KeyError(f"weights missing: {', '.join(missing[:3])}")

    def _needed(self) -> list[str]:
        layer = ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                 "intermediate.dense", "output.dense"]
        norms = ["attention.output.LayerNorm", "output.LayerNorm"]
        names = [f"embeddings.{part}.weight" for part in ("word_embeddings", "position_embeddings",
                                                          "token_type_embeddings", "LayerNorm")]
        names.append("embeddings.LayerNorm.bias")
        for number in range(self.layers):
            names += [f"encoder.layer.{number}.{part}.{kind}" for part in layer + norms for kind in ("weight", "bias")]
        return names

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        with self._lock:
            encoded = self.tokenizer.encode_batch([text.strip() for text in texts])
        return [encoding.ids for encoding in encoded]

    def encode(self, texts: Sequence[str], *, batch_size: int) -> np.ndarray:
        ids = self.token_ids(texts)
        vectors = np.empty((len(ids), self.dimension), np.float32)
        for batch in length_batches([len(row) for row in ids], batch_size):
            vectors[batch] = self._forward([ids[i] for i in batch])
        return vectors

    def _forward(self, rows: list[list[int]]) -> np.ndarray:
        w, width = self.w, max(len(row) for row in rows)
        ids = np.zeros((len(rows), width), np.int64)
        mask = np.zeros((len(rows), width), np.float32)
        for number, row in enumerate(rows):
            ids[number, :len(row)] = row
            mask[number, :len(row)] = 1.0
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:width]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        additive = ((1.0 - mask) * _MASKED)[:, None, None, :]
        for layer in range(self.layers):
            x = self._layer(x, f"encoder.layer.{layer}.", additive)
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        if self.normalize:
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled.astype(np.float32, copy=False)

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        weight = self.w[f"{name}.weight"]           # (in, out)
        return (x.reshape(-1, weight.shape[0]) @ weight + self.w[f"{name}.bias"]).reshape(*x.shape[:-1], -1)

    def _layer(self, x: np.ndarray, prefix: str, additive: np.ndarray) -> np.ndarray:
        batch, width, hidden = x.shape
        size = hidden // self.heads

        def heads(name: str) -> np.ndarray:
            return self._dense(x, f"{prefix}attention.self.{name}").reshape(batch, width, self.heads, size) \
                .transpose(0, 2, 1, 3)

        scores = heads("query") @ heads("key").transpose(0, 1, 3, 2) / np.float32(math.sqrt(size)) + additive
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ heads("value")).transpose(0, 2, 1, 3).reshape(batch, width, hidden)
        x = _layer_norm(x + self._dense(context, f"{prefix}attention.output.dense"),
                        self.w[f"{prefix}attention.output.LayerNorm.weight"],
                        self.w[f"{prefix}attention.output.LayerNorm.bias"], self.eps)
        inner = _gelu(self._dense(x, f"{prefix}intermediate.dense"))
        return _layer_norm(x + self._dense(inner, f"{prefix}output.dense"), self.w[f"{prefix}output.LayerNorm.weight"],
                           self.w[f"{prefix}output.LayerNorm.bias"], self.eps)


def limit_numpy_blas(threads: int) -> None:
    """Run NumPy's own BLAS on ``threads`` threads from now on (process-wide; other libraries' BLAS untouched).

    A query's products are small: on a shared 2-core machine, OpenBLAS's waiting threads made one query take
    0.42 s where one thread takes 13 ms."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:      # it comes with the [retrieval] extra; without it the library's default stays
        return
    for library in ThreadpoolController().lib_controllers:
        if library.user_api == "blas" and "numpy" in Path(library.filepath).as_posix():
            library.set_num_threads(threads)


def numpy_encoder(folder: Path) -> NumpyBert | None:
    """The NumPy encoder of a sentence-transformers folder, or None when the folder is not a plain BERT with mean
    pooling (its weights or tokenizer unreadable, or their libraries, tokenizers and safetensors, missing)."""
    try:
        found = _plain_bert(folder)
        return NumpyBert(folder, *found) if found is not None else None
    except Exception:   # not loadable as a plain BERT (a missing library, weight, or a damaged file): fall back
        return None
