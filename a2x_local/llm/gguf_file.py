"""What a GGUF file is, read from its header before anything loads it: split parts, files that are no GGUF, truncated
files and architectures transformers' GGUF loader lacks are refused here, in a second, naming the file and what to do.

The header is parsed by the `gguf` package (llama.cpp's own reader); only the first four bytes are read by hand, so a
file that is no GGUF at all is named as such before a parser meets it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from a2x_local import extras
from a2x_local.errors import UserError

MAGIC = b"GGUF"
# llama.cpp's gguf-split names its parts NAME-00001-of-00003.gguf.
SPLIT_NAME = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
_BLOCK = 1 << 20
FEATURE = "importing GGUF files"
LLAMA_CPP_HINT = ("serve it with llama.cpp's server (`llama-server -m FILE --port 8080`) and use --engine openai "
                  "--base-url http://127.0.0.1:8080/v1, or fetch the model's safetensors release (models/README.md)")


@dataclass(frozen=True)
class GgufInfo:
    """The facts of one GGUF file that the import checks and records."""

    path: Path
    bytes: int
    architecture: str
    quantization: str          # the file type, as llama.cpp names it (MOSTLY_Q4_1, ...)
    tensor_types: dict[str, int]
    name: str
    context_length: int | None
    gguf_version: int
    tensors: int

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        return data


def _refuse(path: Path, problem: str, hint: str) -> UserError:
    return UserError(f"{path}: {problem}", hint=hint, code="GgufError")


def supported_architectures() -> set[str]:
    """The `general.architecture` values transformers' GGUF loader reads (as of the installed transformers)."""
    extras.require("transformers", feature=FEATURE)
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return set(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"}


def loader_name(architecture: str) -> str:
    """The name transformers' loader files a GGUF architecture under: it renames a few of llama.cpp's names
    (`qwen2moe`, `gpt-oss`, `minimax-m2`, `t5encoder`) before looking them up (`load_gguf_checkpoint`)."""
    if "t5" in architecture:
        return "t5"
    return architecture.replace("-", "_").replace("2moe", "2_moe").replace("3moe", "3_moe")


def inspect_gguf(path: Path) -> GgufInfo:
    """Read and check ``path``'s header; raise `UserError` for a file that cannot be imported."""
    path = Path(path)
    if not path.exists():
        raise _refuse(path, "no such file", "give the path of a .gguf file")
    if not path.is_file():
        raise _refuse(path, "not a regular file", "give the path of a .gguf file, not a folder or a device")
    split = SPLIT_NAME.search(path.name)
    if split:
        raise _refuse(path, f"part {int(split.group(1))} of a GGUF split into {int(split.group(2))} files; the "
                      "import reads one whole file",
                      "join the parts first with llama.cpp's `llama-gguf-split --merge "
                      f"{path.name} MERGED.gguf` (give it the first part), then import MERGED.gguf")
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(len(MAGIC))
    if head != MAGIC:
        kind = "an empty file" if not head else f"a file that starts with {head!r}, not the GGUF magic b'GGUF'"
        raise _refuse(path, f"not a GGUF file: {kind}",
                      "give a .gguf model file (a safetensors folder needs no import: put it in the models folder "
                      "and run `a2x-local models check`)")
    extras.require("gguf", feature=FEATURE)
    import gguf

    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, IndexError, KeyError, OverflowError, MemoryError) as exc:
        raise _refuse(path, f"truncated or damaged: the GGUF reader stopped at {type(exc).__name__}: {exc}"[:400],
                      "copy the file again and compare its size and SHA-256 with the source") from exc
    fields = reader.fields

    def value(key: str) -> Any:
        field = fields.get(key)
        return None if field is None else field.contents()

    count = value(gguf.Keys.Split.LLM_KV_SPLIT_COUNT)
    if count and int(count) > 1:
        part = int(value(gguf.Keys.Split.LLM_KV_SPLIT_NO) or 0) + 1
        raise _refuse(path, f"part {part} of a GGUF split into {count} files (its header says so); the import reads "
                      "one whole file", "join the parts with llama.cpp's `llama-gguf-split --merge FIRST-PART "
                      "MERGED.gguf`, then import MERGED.gguf")
    end = max((tensor.data_offset + int(tensor.n_bytes) for tensor in reader.tensors), default=0)
    if end > size:
        raise _refuse(path, f"truncated: its tensors need {end:,} bytes, the file has {size:,}",
                      "copy the file again and compare its size and SHA-256 with the source")
    architecture = str(value(gguf.Keys.General.ARCHITECTURE) or "")
    if not architecture:
        raise _refuse(path, "its header names no architecture (general.architecture)",
                      "it is not a model file llama.cpp or transformers can load; " + LLAMA_CPP_HINT)
    supported = supported_architectures()
    if architecture not in supported and loader_name(architecture) not in supported:
        raise _refuse(path, f"architecture '{architecture}' is not one transformers' GGUF loader reads (it reads "
                      f"{', '.join(sorted(supported))})", LLAMA_CPP_HINT)
    file_type = value(gguf.Keys.General.FILE_TYPE)
    try:
        quantization = gguf.LlamaFileType(int(file_type)).name if file_type is not None else "unknown"
    except ValueError:
        quantization = f"file type {file_type}"
    types: dict[str, int] = {}
    for tensor in reader.tensors:
        types[tensor.tensor_type.name] = types.get(tensor.tensor_type.name, 0) + 1
    context = value(f"{architecture}.context_length")
    return GgufInfo(path=path.resolve(), bytes=size, architecture=architecture, quantization=quantization,
                    tensor_types=types, name=str(value(gguf.Keys.General.NAME) or ""),
                    context_length=int(context) if context else None,
                    gguf_version=int(value("GGUF.version") or 0), tensors=len(reader.tensors))


def sha256_of(path: Path, tick: Callable[[int], None] | None = None) -> str:
    """The file's SHA-256, read in 1 MiB blocks (``tick`` gets the bytes of each)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
            if tick:
                tick(len(block))
    return digest.hexdigest()
