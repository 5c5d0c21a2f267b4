"""A GGUF header walked by hand, bounded, before the `gguf` package's reader (or transformers) sees the file.

That reader trusts every count it meets: an array that claims 2^62 values in a 70-byte file makes it loop on empty
reads while memory grows without end, an array nested 20,000 deep exhausts the stack, and each value it reads costs
about 700 bytes and 18 µs (a million values: 0.7 GB, 18 s). So every count and length here is checked against the
bytes left in the file and against caps no model's header comes near (a 262k-token vocabulary is 3 arrays of 262k),
and the refusal names the file, the key (or tensor) and the field. The few scalar and text values the import uses
are kept with their types, so a value of the wrong type is named too.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2x_local.errors import UserError
from a2x_local.text import one_line

VERSIONS = (2, 3)                 # what the gguf package's reader reads
MAX_KEYS = 65_536                 # real headers hold about 50
MAX_TENSORS = 65_536              # the largest models hold a few thousand
# The reader loops in Python over every value of an array, scalars too (measured: 2^20 empty strings, 45 s and
# 1.9 GB), so these bound its work. Real vocabularies: SmolLM2 3 arrays of ~49k, Qwen2.5 3 of ~152k, Llama 3 has
# 280,147 merges, Gemma 3 arrays of 262,144 (786,432 values, the most of any known model).
MAX_ARRAY = 1 << 19               # values in one array: 524,288
MAX_VALUES = 3 << 18              # values in all arrays together: 786,432, at most ~1.4 GB and ~30 s in the reader
MAX_NESTING = 8                   # arrays inside arrays; models use none
MAX_NAME = 65_535                 # bytes of a key or a tensor name (the format's own limit for keys)
MAX_STRING = 1 << 24              # bytes of one text value (a chat template is a few KiB)
MAX_KEPT = 1 << 16                # text values longer than this are checked, not kept
MAX_DIMS = 8                      # ggml uses 4
STRING, ARRAY = 8, 9
SCALARS = {0: ("UINT8", "B"), 1: ("INT8", "b"), 2: ("UINT16", "H"), 3: ("INT16", "h"), 4: ("UINT32", "I"),
           5: ("INT32", "i"), 6: ("FLOAT32", "f"), 7: ("BOOL", "?"), 10: ("UINT64", "Q"), 11: ("INT64", "q"),
           12: ("FLOAT64", "d")}
INTEGERS = {0, 1, 2, 3, 4, 5, 10, 11}
_DAMAGED = "copy the file again and compare its size and SHA-256 with the source"


@dataclass
class Header:
    """What the walk found: the version, the tensor count, and each key's type with its scalar or text value
    (bytes; None for arrays and for text longer than `MAX_KEPT`)."""

    version: int
    tensors: int
    values: dict[str, tuple[int, Any]] = field(default_factory=dict)


def type_name(code: int) -> str:
    """A GGUF value type as the format names it."""
    return "STRING" if code == STRING else "ARRAY" if code == ARRAY else SCALARS.get(code, (f"type {code}",))[0]


class _Walk:
    """A cursor over the file's bytes that refuses, naming the file and where, any read past its end."""

    def __init__(self, path: Path, data: mmap.mmap | bytes, order: str) -> None:
        self.path, self.data, self.order, self.pos, self.values_left = path, data, order, 0, MAX_VALUES

    def refuse(self, problem: str, hint: str = _DAMAGED) -> UserError:
        return UserError(f"{one_line(self.path)}: {problem}", hint=hint, code="GgufError")

    def left(self) -> int:
        return len(self.data) - self.pos

    def number(self, fmt: str, where: str) -> Any:
        size = struct.calcsize(fmt)
        if size > self.left():
            raise self.refuse(f"truncated or damaged: the file ends inside {where} (at byte {self.pos:,})")
        value = struct.unpack_from(self.order + fmt, self.data, self.pos)[0]
        self.pos += size
        return value

    def skip(self, size: int, where: str) -> None:
        if size > self.left():
            raise self.refuse(f"truncated or damaged: {where} needs {size:,} bytes, {self.left():,} follow in the "
                              "file")
        self.pos += size

    def text(self, where: str, cap: int, keep: bool = True) -> bytes | None:
        length = self.number("Q", f"the length of {where}")
        if length > cap:
            raise self.refuse(f"the length of {where} claims {length:,} bytes, over the limit of {cap:,}; no model's "
                              "header holds one that long")
        start = self.pos
        self.skip(length, where)
        return bytes(self.data[start:self.pos]) if keep and length <= MAX_KEPT else None

    def name(self, where: str) -> str:
        raw = self.text(where, MAX_NAME) or b""
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.refuse(f"{where} ({raw[:60]!r}) is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                              f"{exc.start})") from None

    def count(self, what: str, value: int, noun: str, cap: int, smallest: int) -> None:
        """``value`` items of at least ``smallest`` bytes each must fit in what is left of the file, and the cap."""
        if value * smallest > self.left():
            raise self.refuse(f"truncated or damaged: {what} claims {value:,} {noun}, which need at least "
                              f"{value * smallest:,} bytes; {self.left():,} follow in the file")
        if value > cap:
            raise self.refuse(f"{what} claims {value:,} {noun}, over the limit of {cap:,}; no model's header comes "
                              "near it")

    def array(self, key: str, depth: int) -> None:
        where = f"the header key {key!r}"
        if depth > MAX_NESTING:
            raise self.refuse(f"{where} holds arrays nested more than {MAX_NESTING} deep; no model's header nests "
                              "them", hint="the file is not a model llama.cpp wrote; " + _DAMAGED)
        item = self.number("I", f"the array type of {where}")
        length = self.number("Q", f"the array length of {where}")
        if item not in SCALARS and item not in (STRING, ARRAY):
            raise self.refuse(f"{where} is an array of unknown type {item}")
        size = struct.calcsize(SCALARS[item][1]) if item in SCALARS else 8 if item == STRING else 12
        self.count(f"the array length of {where}", length, f"{type_name(item)} values", MAX_ARRAY, size)
        self.values_left -= length
        if self.values_left < 0:
            raise self.refuse(f"{where}: the header's arrays hold more than {MAX_VALUES:,} values in all; no "
                              "model's header comes near it")
        if item in SCALARS:
            self.pos += length * size
        for _ in range(length if item in (STRING, ARRAY) else 0):
            if item == STRING:
                self.text(f"a text value in {where}", MAX_STRING, keep=False)
            else:
                self.array(key, depth + 1)


def read_header(path: Path) -> Header:
    """Walk ``path``'s GGUF header (after its magic); raise `UserError` naming the file, key and field for any
    count, length, nesting or type that is out of bounds."""
    with path.open("rb") as handle:
        data: mmap.mmap | bytes
        try:
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:      # an empty file cannot be mapped
            data = b""
        try:
            return _walk(path, data)
        finally:
            if isinstance(data, mmap.mmap):
                data.close()


def _walk(path: Path, data: mmap.mmap | bytes) -> Header:
    raw = data[4:8]
    order = ">" if len(raw) == 4 and struct.unpack("<I", raw)[0] & 0xFFFF == 0 else "<"   # as the reader decides
    walk = _Walk(path, data, order)
    walk.pos = 4
    version = walk.number("I", "the version field")
    if version not in VERSIONS:
        raise walk.refuse(f"GGUF version {version} (the header's version field); the reader reads versions "
                          f"{' and '.join(map(str, VERSIONS))}", hint="convert the model again with a current "
                          "llama.cpp (convert_hf_to_gguf.py)")
    tensors = walk.number("Q", "the tensor count")
    keys = walk.number("Q", "the key-value count")
    walk.count("the header's key-value count", keys, "keys", MAX_KEYS, 13)       # key length, type, a byte at least
    walk.count("the header's tensor count", tensors, "tensors", MAX_TENSORS, 24)  # name length, dims, type, offset
    header = Header(version=version, tensors=tensors)
    for index in range(keys):
        key = walk.name(f"the name of header key {index}")
        if key in header.values:
            raise walk.refuse(f"the header key {key!r} appears twice")
        kind = walk.number("I", f"the type of the header key {key!r}")
        if kind in SCALARS:
            header.values[key] = (kind, walk.number(SCALARS[kind][1], f"the value of the header key {key!r}"))
        elif kind == STRING:
            header.values[key] = (kind, walk.text(f"the text of the header key {key!r}", MAX_STRING))
        elif kind == ARRAY:
            header.values[key] = (kind, None)
            walk.array(key, 1)
        else:
            raise walk.refuse(f"the header key {key!r} has unknown type {kind}")
    for index in range(tensors):
        name = walk.name(f"the name of tensor {index}")
        where = f"tensor {index} ({name!r})"
        dims = walk.number("I", f"the dimension count of {where}")
        if dims > MAX_DIMS:
            raise walk.refuse(f"{where} claims {dims:,} dimensions, over the limit of {MAX_DIMS}")
        elements = 1
        for _ in range(dims):
            elements *= walk.number("Q", f"the shape of {where}")
        if elements >= 1 << 62:
            raise walk.refuse(f"the shape of {where} claims {elements:,} elements; no file holds that many")
        walk.skip(12, f"the type and offset of {where}")
    return header
