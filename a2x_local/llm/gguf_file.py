"""What a GGUF file is, read from its header before anything loads it: split parts, files that are no GGUF, truncated
files and architectures transformers' GGUF loader lacks are refused here, in a second, naming the file and what to do.

The header is walked by hand first (`gguf_header`: every count, length and nesting bounded by the file's size and by
caps, the values the import uses kept with their types), then parsed by the `gguf` package (llama.cpp's own reader)
for the tensors; a file that is no GGUF at all is named as such by its first four bytes before either meets it.
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
from a2x_local.llm.gguf_header import INTEGERS, STRING, Header, read_header, type_name
from a2x_local.llm.model_check import link_loop
from a2x_local.text import one_line

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
    return UserError(f"{one_line(path)}: {problem}", hint=hint, code="GgufError")


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
    loop = link_loop(path)
    if loop:
        raise _refuse(path, loop, "remove the looping link, or give the path of the .gguf file itself")
    if not path.exists():
        raise _refuse(path, "no such file", "give the path of a .gguf file")
    if not path.is_file():
        raise _refuse(path, "not a regular file", "give the path of a .gguf file, not a folder or a device")
    split = SPLIT_NAME.search(path.name)
    if split:
        raise _refuse(path, f"part {int(split.group(1))} of a GGUF split into {int(split.group(2))} files; the "
                      "import reads one whole file",
                      "join the parts first with llama.cpp's `llama-gguf-split --merge "
                      f"{one_line(path.name)} MERGED.gguf` (give it the first part), then import MERGED.gguf")
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(len(MAGIC))
    if head != MAGIC:
        kind = "an empty file" if not head else f"a file that starts with {head!r}, not the GGUF magic b'GGUF'"
        raise _refuse(path, f"not a GGUF file: {kind}",
                      "give a .gguf model file (a safetensors folder needs no import: put it in the models folder "
                      "and run `a2x-local models check`)")
    header = read_header(path)
    # The architecture is in the header walked already: a wrong one is refused in a second, before the reader's
    # much slower parse meets the file.
    architecture = _text(path, header, "general.architecture") or ""
    if not architecture:
        raise _refuse(path, "its header names no architecture (general.architecture)",
                      "it is not a model file llama.cpp or transformers can load; " + LLAMA_CPP_HINT)
    supported = supported_architectures()
    if architecture not in supported and loader_name(architecture) not in supported:
        raise _refuse(path, f"architecture '{one_line(architecture)}' is not one transformers' GGUF loader reads (it "
                      f"reads {', '.join(sorted(supported))})", LLAMA_CPP_HINT)
    extras.require("gguf", feature=FEATURE)
    import gguf

    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, IndexError, KeyError, OverflowError, MemoryError) as exc:
        raise _refuse(path, f"truncated or damaged: the GGUF reader stopped at {type(exc).__name__}: {exc}"[:400],
                      "copy the file again and compare its size and SHA-256 with the source") from exc

    count = _integer(path, header, gguf.Keys.Split.LLM_KV_SPLIT_COUNT)
    if count and count > 1:
        part = (_integer(path, header, gguf.Keys.Split.LLM_KV_SPLIT_NO) or 0) + 1
        raise _refuse(path, f"part {part} of a GGUF split into {count} files (its header says so); the import reads "
                      "one whole file", "join the parts with llama.cpp's `llama-gguf-split --merge FIRST-PART "
                      "MERGED.gguf`, then import MERGED.gguf")
    end = max((tensor.data_offset + int(tensor.n_bytes) for tensor in reader.tensors), default=0)
    if end > size:
        raise _refuse(path, f"truncated: its tensors need {end:,} bytes, the file has {size:,}",
                      "copy the file again and compare its size and SHA-256 with the source")
    file_type = _integer(path, header, gguf.Keys.General.FILE_TYPE)
    try:
        quantization = gguf.LlamaFileType(file_type).name if file_type is not None else "unknown"
    except ValueError:
        quantization = f"file type {file_type}"
    types: dict[str, int] = {}
    for tensor in reader.tensors:
        types[tensor.tensor_type.name] = types.get(tensor.tensor_type.name, 0) + 1
    context = _integer(path, header, f"{architecture}.context_length")
    return GgufInfo(path=path.resolve(), bytes=size, architecture=architecture, quantization=quantization,
                    tensor_types=types, name=_text(path, header, gguf.Keys.General.NAME) or "",
                    context_length=context or None, gguf_version=header.version, tensors=len(reader.tensors))


def _wrong_type(path: Path, key: str, kind: int, want: str) -> UserError:
    return _refuse(path, f"the header key '{key}' holds {type_name(kind)}, not {want}",
                   "the file's metadata is damaged or was written by a broken converter; convert the model again "
                   "with a current llama.cpp, or fetch the file again")


def _integer(path: Path, header: Header, key: str) -> int | None:
    """The integer at ``key`` (None where absent); any other type is refused naming the key: `int("abc")` was a
    traceback."""
    kind, value = header.values.get(key, (None, None))
    if kind is None:
        return None
    if kind not in INTEGERS:
        raise _wrong_type(path, key, kind, "an integer")
    if value < 0:
        raise _refuse(path, f"the header key '{key}' holds {value}, a negative count", "fetch the file again")
    return int(value)


def _text(path: Path, header: Header, key: str) -> str | None:
    """The UTF-8 text at ``key`` (None where absent); another type, text that is not UTF-8, or text too long to be
    a name is refused naming the key."""
    kind, value = header.values.get(key, (None, None))
    if kind is None:
        return None
    if kind != STRING:
        raise _wrong_type(path, key, kind, "text")
    if value is None:
        raise _refuse(path, f"the header key '{key}' holds text too long for a name", "fetch the file again")
    try:
        return str(value.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _refuse(path, f"the header key '{key}' is not UTF-8 text ({value[:40]!r}: byte 0x{value[exc.start]:02x}"
                      f" at offset {exc.start})", "fetch the file again, or convert the model again") from None


def sha256_of(path: Path, tick: Callable[[int], None] | None = None) -> str:
    """The file's SHA-256, read in 1 MiB blocks (``tick`` gets the bytes of each)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
            if tick:
                tick(len(block))
    return digest.hexdigest()
