"""A GGUF file (the usual format of downloaded open weights) -> a model folder the vllm and transformers engines load.

transformers reads the file (`from_pretrained(dir, gguf_file=..., quantization_config=GgufConfig(dequantize=True))`:
without `dequantize` the weights stay packed and `save_pretrained` refuses them) and writes config, tokenizer, chat
template and safetensors weights. vLLM's CPU backend cannot read GGUF itself, but loads the folder.

Weights are written in float32 by default. Dequantizing a quantized block gives float32 values (scale x code +
offset); float32 keeps them exactly (in SmolLM2's Q4_1 file, bfloat16 would round 79% of them and float16 42%), and
float32 is what a CPU without bfloat16 computes in (bfloat16 weights there fall back to slow paths). It doubles the
folder against bfloat16 (538 MB instead of 269 MB for 135 M parameters); `dtype="bfloat16"` halves a large model
meant for a GPU.

The folder is written beside its place under a hidden name and renamed at the end, under `ModelFolderLock`: an
interrupted import leaves no folder `models check` would accept, and two processes never convert the same folder
at once. The folder records where it came from in `a2x-gguf-import.json`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2x_local import extras, provenance
from a2x_local.errors import A2XError, UserError
from a2x_local.jsonfiles import read_json
from a2x_local.llm.gguf_file import FEATURE, LLAMA_CPP_HINT, GgufInfo
from a2x_local.llm.model_check import ModelCheck, check_model
from a2x_local.llm.models import force_offline
from a2x_local.locks import ModelFolderLock
from a2x_local.outfiles import write_output

PROVENANCE_FILE = "a2x-gguf-import.json"
IMPORT_DTYPES = ("float32", "bfloat16", "float16")
# One folder name, no way out of the models folder, nothing a shell or a TOML key would trip on. Used with
# `fullmatch`: with `match`, a `$` also matches before a final line break, so "nl\n" passed (probe P01).
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
HEARTBEAT_S = 15.0

Step = Callable[[str], None]


@dataclass
class ImportReport:
    """What one import wrote."""

    folder: Path
    gguf: GgufInfo
    sha256: str
    dtype: str
    source: str
    bytes: int
    seconds: float
    check: ModelCheck

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.folder), "gguf": self.gguf.to_dict(), "sha256": self.sha256, "dtype": self.dtype,
                "source": self.source, "bytes": self.bytes, "seconds": round(self.seconds, 1),
                "parameters": self.check.parameters}


def check_name(name: str) -> str:
    """``name`` when it is one safe path segment (the model folder's name); else `UserError`."""
    if not SAFE_NAME.fullmatch(name) or name.endswith((".", ".lock")) or ".." in name:
        raise UserError(f"model name {name!r} is not one safe folder name",
                        hint="use letters, digits, '.', '_' and '-' (at most 100, starting with a letter or digit), "
                             "e.g. --name my-model-7b")
    return name


def check_dtype(dtype: str) -> str:
    if dtype not in IMPORT_DTYPES:
        raise UserError(f"--weights-dtype {dtype!r} is not one the import writes",
                        hint=f"use one of: {', '.join(IMPORT_DTYPES)}")
    return dtype


def read_provenance(folder: Path) -> dict[str, Any] | None:
    """The import record of a model folder, or None when it has none (or one that cannot be read)."""
    record = folder / PROVENANCE_FILE
    if not record.is_file():
        return None
    try:
        data = read_json(record)
    except A2XError:
        return None
    return data if isinstance(data, dict) else None


@contextmanager
def folder_lock(folder: Path, *, wait_s: float, step: Step) -> Iterator[None]:
    """Hold the folder's import lock; waits up to ``wait_s`` for another process (0: refuse at once)."""
    lock = ModelFolderLock(folder, job=f"importing {folder.name}")
    lock.acquire_waiting(wait_s, lambda holder: step(f"waiting for {holder} to finish writing {folder.name}"))
    try:
        yield
    finally:
        lock.release()


@contextmanager
def heartbeat(step: Step, doing: str) -> Iterator[None]:
    """A line every HEARTBEAT_S seconds while a long call gives no sign of life."""
    stop = threading.Event()
    started = time.monotonic()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            step(f"  still {doing} ({time.monotonic() - started:.0f} s)")

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """transformers' own bars and warnings off while converting: the import prints its own progress lines."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _clear_leftovers(folder: Path) -> None:
    """Remove what killed imports of this folder left (only called under its lock, so none is in use)."""
    for left in [*folder.parent.glob(f".{folder.name}.partial-*"), *folder.parent.glob(f".{folder.name}.old-*")]:
        shutil.rmtree(left, ignore_errors=True)


def _folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _convert(info: GgufInfo, partial: Path, dtype: str, step: Step) -> None:
    """Load the GGUF with transformers, dequantized, and save it as a model folder at ``partial``."""
    for module in ("torch", "transformers", "gguf", "accelerate"):
        extras.require(module, feature=FEATURE)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    where = {"pretrained_model_name_or_path": info.path.parent, "gguf_file": info.path.name,
             "local_files_only": True}
    try:
        with _quiet_transformers():
            step("reading the tokenizer and chat template")
            tokenizer = AutoTokenizer.from_pretrained(**where)
            if info.context_length:
                tokenizer.model_max_length = info.context_length
            step(f"reading and dequantizing the weights ({info.quantization} -> {dtype}; about a minute per "
                 "100 MB of GGUF on 2 cores)")
            with heartbeat(step, "dequantizing"):
                model = AutoModelForCausalLM.from_pretrained(
                    **where, quantization_config=GgufConfig(dequantize=True), dtype=getattr(torch, dtype))
            step(f"writing {dtype} safetensors, tokenizer and chat template")
            model.save_pretrained(partial)
            tokenizer.save_pretrained(partial)
    except A2XError:
        raise
    except Exception as exc:  # transformers' loader raises many kinds for a file it cannot read; each is named
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(f"{info.path}: transformers could not convert it ({type(exc).__name__}: {first})"[:600],
                        hint=LLAMA_CPP_HINT, code="GgufError") from exc


def _record(partial: Path, info: GgufInfo, sha256: str, dtype: str, source: str, seconds: float) -> None:
    record = {
        "format": "a2x-gguf-import", "version": 1,
        "gguf": {**info.to_dict(), "file": info.path.name, "sha256": sha256},
        "source": source, "dtype": dtype,
        "converted_by": provenance.current().describe(), "a2x_local_version": provenance.current().version,
        "transformers_version": _distribution_version("transformers"),
        "gguf_package_version": _distribution_version("gguf"),
        "converted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": round(seconds, 1),
    }
    write_output(partial / PROVENANCE_FILE, json.dumps(record, indent=2) + "\n", what="import record")


def _distribution_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _usual_permissions(folder: Path) -> None:
    """save_pretrained writes some files 0600; a models folder is read by whoever runs the engines."""
    umask = os.umask(0)
    os.umask(umask)
    for path in folder.iterdir():
        if path.is_file():
            path.chmod(0o666 & ~umask)


def write_model_folder(info: GgufInfo, sha256: str, folder: Path, *, dtype: str = "float32", source: str = "",
                       replace: bool = False, step: Step = lambda _: None) -> ImportReport:
    """Convert the checked GGUF ``info`` into ``folder``: whole, checked by `models check`, or not at all.

    Call it holding ``folder_lock(folder)``. An existing ``folder`` is refused unless ``replace``.
    """
    check_dtype(dtype)
    force_offline()
    started = time.monotonic()
    models_dir = folder.parent
    try:
        models_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{models_dir}: cannot create the models folder: {exc.strerror or exc}",
                        hint="set $A2X_MODELS_DIR to a folder you can write") from exc
    if folder.exists() and not replace:
        raise UserError(f"{folder} already exists", hint="pass --force to replace it, or choose another --name")
    _clear_leftovers(folder)
    partial = models_dir / f".{folder.name}.partial-{os.getpid()}"
    old = models_dir / f".{folder.name}.old-{os.getpid()}"
    try:
        _convert(info, partial, dtype, step)
        _record(partial, info, sha256, dtype, source or str(info.path), time.monotonic() - started)
        _usual_permissions(partial)
        step("checking the folder (`a2x-local models check`)")
        check = check_model(partial, target=str(folder), dtype=dtype, max_model_len=info.context_length)
        if not check.ok:
            raise UserError(f"{info.path}: the converted folder is not usable: " + " ".join(check.problems),
                            hint=LLAMA_CPP_HINT, code="GgufError")
        if folder.exists():
            folder.replace(old)
        partial.replace(folder)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        if old.exists() and not folder.exists():
            old.replace(folder)    # the rename in between failed: the folder that was there stays
        raise
    shutil.rmtree(old, ignore_errors=True)
    check.path = folder
    return ImportReport(folder, info, sha256, dtype, source or str(info.path), _folder_bytes(folder),
                        time.monotonic() - started, check)
