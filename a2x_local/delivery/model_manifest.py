"""The manifest of a packed model (`a2x-model-manifest.json`): written by `models pack`, read back by `models verify`
from the archive, beside it, or from the unpacked folder.

A manifest is input like any other: read bounded (`MANIFEST_MAX_BYTES`, the project's JSON reader and its nesting
limit, a regular file only) and checked field by field with pydantic, so a malformed one is an error naming the
file (or the archive and its member), the entry and the field, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, field_validator

from a2x_local.delivery.model_files import MAX_FILES, name_problem, path_problem
from a2x_local.errors import InputError
from a2x_local.jsonfiles import JsonLimits, parse_json, read_bytes

FORMAT = "a2x-model-pack"
# A manifest lists at most MAX_FILES files of ~200 bytes each, plus the check's outcome: a few megabytes at most.
MANIFEST_MAX_BYTES = 8 << 20
SIZE_HINT = "not a manifest `models pack` wrote (those are far smaller): copy the archive and its manifest again"
_HINT = "pack the model again with `a2x-local models pack` (the manifest must be as it wrote it)"


class ManifestFile(BaseModel):
    """One file of the model: where it lies inside `NAME/`, its size and its SHA-256."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: StrictStr
    bytes: StrictInt = Field(ge=0, le=1 << 50)
    sha256: StrictStr = Field(pattern=r"^[0-9a-f]{64}$")

    @field_validator("path")
    @classmethod
    def _inside(cls, value: str) -> str:
        problem = path_problem(value)
        if problem is not None:
            raise ValueError(f"{value[:200]!r} {problem}")
        return value


class Manifest(BaseModel):
    """What `models pack` writes (version 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["a2x-model-pack"]
    version: Literal[1]
    name: StrictStr
    alias: StrictStr | None = None
    checked_with: dict[str, Any] = Field(default_factory=dict)
    created_at: StrictStr | None = None
    files: list[ManifestFile] = Field(max_length=MAX_FILES)
    total_bytes: StrictInt = Field(ge=0)

    @field_validator("name")
    @classmethod
    def _one_segment(cls, value: str) -> str:
        problem = name_problem(value)
        if problem is not None:
            raise ValueError(f"{value[:200]!r} {problem}")
        return value

    def by_path(self) -> dict[str, ManifestFile]:
        return {entry.path: entry for entry in self.files}


def _where(loc: tuple[int | str, ...]) -> tuple[str | None, str | None]:
    """(entry, field) of a pydantic error location: ("files[3]", "bytes"), (None, "name")."""
    if len(loc) >= 2 and loc[0] == "files" and isinstance(loc[1], int):
        return f"files[{loc[1]}]", ".".join(str(part) for part in loc[2:]) or None
    return None, ".".join(str(part) for part in loc) or None


def parse_manifest(text: str, where: str) -> Manifest:
    """The manifest in ``text`` (already read bounded), checked; ``where`` names the file or `ARCHIVE:MEMBER`."""
    data = parse_json(text, JsonLimits.defaults(), where, hint=_HINT)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(where, "not an a2x-local model manifest (no \"format\": \"a2x-model-pack\")",
                         hint="pack the folder with `a2x-local models pack`")
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        entry, field = _where(tuple(errors[0]["loc"]))
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise InputError(where, f"{errors[0]['msg']}{more}", entry=entry, field=field, hint=_HINT) from exc
    paths = [entry.path for entry in manifest.files]
    if len(set(paths)) != len(paths):
        twice = next(path for path in paths if paths.count(path) > 1)
        raise InputError(where, f"lists '{twice}' twice", entry=f"files[{paths.index(twice)}]", field="path",
                         hint=_HINT)
    if manifest.total_bytes != sum(entry.bytes for entry in manifest.files):
        raise InputError(where, "is not the sum of the files' bytes", field="total_bytes", hint=_HINT)
    return manifest


def decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(where, f"not UTF-8 text (byte {exc.start})", hint=_HINT) from exc


def read_manifest(path: Path) -> Manifest:
    """A manifest file (beside an archive, or in an unpacked folder): a regular file itself, never a link (one to a
    manifest elsewhere would vouch for a folder it never described), bounded, then checked."""
    data = read_bytes(path, MANIFEST_MAX_BYTES, what="model manifest", size_hint=SIZE_HINT, follow_links=False,
                      hint="put the manifest that came with the archive in its place (the archive holds a copy: "
                      "`tar -xf NAME.tar NAME/a2x-model-manifest.json`)")
    return parse_manifest(decode(data, str(path)), str(path))
