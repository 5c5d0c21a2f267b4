"""Reading JSON and JSON Lines files, bounded: every JSON file a2x-local reads goes through here (services to ingest,
query and steps files, tree imports, run records and summaries, kept build rounds, index and model files).

A file is refused with an error naming it (and the entry or line) when it is not a regular file once symbolic links
are resolved (a device never ends, a named pipe blocks), larger than ``max_file_bytes`` (files are read whole, so
their size is bounded, while reading too, not only by what the file claims), not UTF-8 (a BOM is accepted), empty,
not JSON, nested deeper than ``max_json_depth`` (Python's decoder recurses, so a hostile file of a few kilobytes
could exhaust the stack), or holding an integer of more digits than Python converts (4,300, `long_ints`: named by
its key path, `[0].metadata.n`).
The limits are `[registry]` max_file_bytes and max_json_depth; `JsonLimits.defaults()` are the packaged ones.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from a2x_local import long_ints
from a2x_local.errors import InputError
from a2x_local.outfiles import kind_of
from a2x_local.settings import Settings, packaged_defaults

_SIZE_HINT = "split it, or raise [registry] max_file_bytes to accept it"
_DEPTH_HINT = "flatten it, or raise [registry] max_json_depth to accept it"
_TOO_DEEP = "is nested too deeply"
JSONL_HINT = "a JSONL file holds one JSON object per line"
_CHUNK = 1 << 20
_SYNTAX_HINT = "fix the JSON at that place (`python -m json.tool FILE` shows it too)"


@dataclass(frozen=True)
class JsonLimits:
    """How large a file and how deeply nested its JSON may be (the `[registry]` keys of the same names)."""

    max_file_bytes: int
    max_json_depth: int

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> JsonLimits:
        """The limits of merged configuration tables (the `[registry]` table validates them)."""
        table = config["registry"]
        return cls(max_file_bytes=int(table["max_file_bytes"]), max_json_depth=int(table["max_json_depth"]))

    @classmethod
    def from_settings(cls, settings: Settings) -> JsonLimits:
        return cls.of(settings.config)

    @classmethod
    def defaults(cls) -> JsonLimits:
        """The packaged limits: for library callers without settings."""
        return _packaged_limits()

    def allowing_depth(self, depth: int) -> JsonLimits:
        """These limits, nesting allowed to at least ``depth`` (a format whose own rules bound it, e.g. a tree)."""
        return replace(self, max_json_depth=max(self.max_json_depth, depth))


@cache
def _packaged_limits() -> JsonLimits:
    return JsonLimits.of(packaged_defaults())


def read_bytes(path: Path, max_bytes: int, *, what: str = "", hint: str | None = None,
               size_hint: str = _SIZE_HINT, follow_links: bool = True) -> bytes:
    """The bytes of a regular file (symbolic links resolved, unless ``follow_links`` is False: then a link is
    refused and the file opened with O_NOFOLLOW), at most ``max_bytes`` of them.

    Anything else is refused before it is opened: a device such as /dev/zero never ends, and a named pipe blocks
    until a writer comes. The size is bounded while reading, not only by the size the file claims (a file that
    grows, or a /proc file that claims 0 bytes), and the file opened is checked again (swapped in meanwhile)."""
    shown = str(path)
    real = os.path.realpath(path) if follow_links else os.path.abspath(path)
    try:
        mode = os.stat(real, follow_symlinks=follow_links).st_mode
        if stat.S_ISLNK(mode):
            raise InputError(shown, f"is a symbolic link (to {os.readlink(real)}); this file is read only as itself, "
                             "never through a link", hint=hint or "put the file itself in the link's place")
        if stat.S_ISDIR(mode):
            raise InputError(shown, "is a folder where a file was expected",
                             hint=hint or "give a file's path, not a folder's")
        fd = _open_regular(shown, real, mode, os.O_NOFOLLOW if not follow_links else 0)
        try:
            data = _read_bounded(fd, shown, max_bytes, size_hint)
        finally:
            os.close(fd)
    except FileNotFoundError as exc:
        missing = f"{what} file not found".strip() if not path.is_symlink() else "is a broken symbolic link"
        raise InputError(shown, missing, hint="check the path") from exc
    except OSError as exc:
        raise InputError(shown, f"cannot read file: {exc.strerror or exc}",
                         hint="check the file's permissions") from exc
    return data


def open_regular(path: Path, *, hint: str | None = None) -> int:
    """A read-only descriptor of the regular file at ``path`` (symbolic links resolved), for a caller that reads it
    in blocks (hashing a model's weights); anything else is refused as `read_bytes` refuses it, never opened
    blocking (a named pipe would hang the caller)."""
    shown = str(path)
    real = os.path.realpath(path)
    try:
        mode = os.stat(real).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(shown, "is a folder where a file was expected",
                             hint=hint or "give a file's path, not a folder's")
        return _open_regular(shown, real, mode)
    except FileNotFoundError as exc:
        raise InputError(shown, "file not found" if not Path(path).is_symlink() else "is a broken symbolic link",
                         hint="check the path") from exc
    except OSError as exc:
        raise InputError(shown, f"cannot read file: {exc.strerror or exc}",
                         hint="check the file's permissions") from exc


def _refuse_special(shown: str, real: str, mode: int) -> InputError:
    where = shown if os.path.abspath(shown) == real else f"{shown} (→ {real})"
    return InputError(where, f"is {kind_of(mode)}, not a regular file; only regular files are read",
                      hint="copy what it holds into a file and give that file")


def _open_regular(shown: str, real: str, mode: int, flags: int = 0) -> int:
    """A descriptor of the regular file at ``real``; non-blocking while it is checked, so a pipe never hangs."""
    if not stat.S_ISREG(mode):
        raise _refuse_special(shown, real, mode)
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | flags)
    opened = os.fstat(fd).st_mode
    if not stat.S_ISREG(opened):
        os.close(fd)
        raise _refuse_special(shown, real, opened)
    os.set_blocking(fd, True)
    return fd


def _read_bounded(fd: int, shown: str, max_bytes: int, size_hint: str = _SIZE_HINT) -> bytes:
    size = os.fstat(fd).st_size
    if size > max_bytes:
        raise InputError(shown, f"is {size:,} bytes, over the limit of {max_bytes:,}", hint=size_hint)
    chunks, total = [], 0
    while True:
        chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise InputError(shown, f"holds more than the limit of {max_bytes:,} bytes (it grew while read)",
                             hint=size_hint)


def read_text(path: Path, limits: JsonLimits | None = None, *, what: str = "", empty_ok: bool = False,
              hint: str | None = None) -> str:
    """The file's text: readable, UTF-8 (a BOM is accepted), within the size limit and, unless ``empty_ok``, not
    empty (``hint`` says what belongs in it). ``what`` names the kind of file in "not found" ("steps" -> "steps
    file not found")."""
    limits = limits or JsonLimits.defaults()
    shown = str(path)
    data = read_bytes(Path(path), limits.max_file_bytes, what=what, hint=hint)
    if not data.strip() and not empty_ok:
        raise InputError(shown, "the file is empty", hint=hint or "give a file with content (docs/registry.md)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(shown, f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} "
                                f"(line {line})", hint="convert the file to UTF-8") from exc


def parse_json(text: str, limits: JsonLimits | None, file: str, entry: str | None = None, field: str | None = None,
               *, line: int | None = None, hint: str | None = None) -> Any:
    """JSON text to Python values, refusing nesting deeper than the limit. ``entry``/``field`` name where the text
    came from inside ``file`` (a CSV cell, a service file's line); ``line``: the text is that line of a JSON Lines
    file."""
    limits = limits or JsonLimits.defaults()
    try:
        value = json.loads(text)
    except RecursionError as exc:
        raise InputError(file, f"{_TOO_DEEP} (Python's JSON decoder gave up)", entry=entry, field=field,
                         hint=_DEPTH_HINT) from exc
    except json.JSONDecodeError as exc:
        if line is not None:
            raise InputError(file, f"line {line} is not valid JSON (malformed JSON at column {exc.colno}): "
                                   f"{exc.msg}", hint=hint or JSONL_HINT) from exc
        where = f"line {exc.lineno}, column {exc.colno}" if entry is None else f"column {exc.colno}"
        raise InputError(file, f"not valid JSON (malformed JSON at {where}): {exc.msg}", entry=entry, field=field,
                         hint=hint or _SYNTAX_HINT) from exc
    except ValueError as exc:     # the one other error of json.loads: an integer past Python's digit limit
        raise long_number(text, file, exc, entry=entry if line is None else f"line {line}", field=field) from exc
    check_depth(value, limits.max_json_depth, file, entry=entry if line is None else f"line {line}", field=field)
    return value


class LongIntegerError(InputError):
    """Valid JSON but for an integer longer than Python converts (so not to be read again as JSON Lines)."""


def long_number(text: str, file: str, exc: ValueError, *, entry: str | None = None,
                field: str | None = None) -> InputError:
    """The error for JSON holding an integer of more digits than Python converts (`long_ints`), naming its key
    path; any other ValueError is reported as it is."""
    if not long_ints.too_long(str(exc)):
        return InputError(file, f"not valid JSON: {exc}", entry=entry, field=field, hint=_SYNTAX_HINT)
    path = long_ints.json_path(text)
    inner = field if not path else path if not field else f"{field}{'' if path[0] == '[' else '.'}{path}"
    return LongIntegerError(file, f"holds an integer of more than {long_ints.max_digits():,} digits"
                            f"{long_ints.place(text)}; no value a2x-local reads is that long", entry=entry,
                            field=inner, hint=long_ints.HINT)


def check_depth(value: Any, limit: int, file: str, *, entry: str | None = None, field: str | None = None) -> None:
    """Refuse arrays and objects nested deeper than ``limit``, naming where (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, int, tuple[str, ...]]] = [(value, 1, ())]
    while stack:
        node, depth, where = stack.pop()
        if isinstance(node, dict):
            children: Any = ((f".{key}", child) for key, child in node.items())
        elif isinstance(node, list):
            children = ((f"[{k}]", child) for k, child in enumerate(node))
        else:
            continue
        if depth > limit:
            shown = "$" + "".join(where[:8]) + ("…" if len(where) > 8 else "")
            raise InputError(file, f"{_TOO_DEEP}: more than {limit} levels of arrays and objects at {shown}",
                             entry=entry, field=field, hint=_DEPTH_HINT)
        stack.extend((child, depth + 1, (*where, step)) for step, child in children)


def read_json(path: Path, limits: JsonLimits | None = None, *, what: str = "", hint: str | None = None) -> Any:
    """One JSON document from a file, bounded (see the module's docstring)."""
    path = Path(path)
    return parse_json(read_text(path, limits, what=what, hint=hint), limits, str(path), hint=hint)


def json_lines(text: str, file: str, limits: JsonLimits | None = None, *,
               hint: str | None = None) -> list[tuple[str, Any]]:
    """Each non-empty line of JSON Lines text as ("line N", value)."""
    limits = limits or JsonLimits.defaults()
    return [(f"line {number}", parse_json(line, limits, file, line=number, hint=hint))
            for number, line in enumerate(text.splitlines(), start=1) if line.strip()]


@dataclass(frozen=True)
class JsonFile:
    """A JSON or JSON Lines file as read: its text, and either its one JSON ``value`` or each line's value."""

    text: str
    value: Any = None
    lines: list[tuple[str, Any]] | None = None   # JSON Lines: ("line N", value) for each non-empty line

    def entries(self) -> list[tuple[str, Any]]:
        """Each entry with its name for errors: a line ("line N"), a list item (its index), or the one value ("0")."""
        if self.lines is not None:
            return self.lines
        if isinstance(self.value, list):
            return [(str(index), entry) for index, entry in enumerate(self.value)]
        return [("0", self.value)]


def read_json_file(path: Path, *, what: str, hint: str, limits: JsonLimits | None = None) -> JsonFile:
    """The file as JSON, or as JSON Lines (a .jsonl name, or JSON that fails and starts with "{"), so query, steps
    and other input files accept the same two formats and fail alike; ``what`` names the file in "not found"."""
    path, limits = Path(path), limits or JsonLimits.defaults()
    text = read_text(path, limits, what=what, hint=hint)
    if path.suffix.lower() == ".jsonl":
        return JsonFile(text, lines=json_lines(text, str(path), limits))
    try:
        return JsonFile(text, value=parse_json(text, limits, str(path), hint=hint))
    except InputError as exc:
        if not text.lstrip().startswith("{") or isinstance(exc, LongIntegerError):   # JSON: not JSON Lines
            raise
    return JsonFile(text, lines=json_lines(text, str(path), limits))
