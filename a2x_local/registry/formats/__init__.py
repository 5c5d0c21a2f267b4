"""Which input formats exist, how each is recognised, and reading any of them into Services."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from a2x_local.errors import InputError, UserError
from a2x_local.jsonfiles import read_json
from a2x_local.registry.formats import a2a_card, mcp_server, mcp_tools, service_list, skills, tabular
from a2x_local.registry.formats._common import FORMAT_HINT, Limits
from a2x_local.registry.formats._walk import SERVICE_FILE_SUFFIXES, SKILL_FILE, Skipped, check_name, walk_files
from a2x_local.registry.types import Service

__all__ = ["FORMATS", "Limits", "Skipped", "detect_file", "read_path"]

# Order matters for auto-detection: the most specific JSON shapes are tried first.
_JSON_FORMATS = (mcp_tools, service_list, a2a_card, mcp_server)

FORMATS: dict[str, str] = {
    "auto": "recognise each file by name and content",
    service_list.NAME: service_list.SUMMARY,
    mcp_server.NAME: mcp_server.SUMMARY,
    mcp_tools.NAME: mcp_tools.SUMMARY,
    a2a_card.NAME: a2a_card.SUMMARY,
    skills.NAME: skills.SUMMARY,
    "jsonl": "JSON Lines, one {id, name, description, ...} object per line",
    "csv": "CSV with a header row holding id, name, description (other columns go to metadata)",
}


def _looks_like_queries(data: Any) -> bool:
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "correct_tools" in data[0]


def detect_file(path: Path, data: Any = None, limits: Limits | None = None) -> str:
    """The format of one file, from its name and (for JSON) its shape."""
    if path.name == SKILL_FILE or path.suffix.lower() == ".md":
        return skills.NAME
    if path.suffix.lower() == ".jsonl":
        return "jsonl"
    if path.suffix.lower() == ".csv":
        return "csv"
    data = read_json(path, limits or Limits.defaults()) if data is None else data
    for module in _JSON_FORMATS:
        if module.matches(data):
            return module.NAME
    if _looks_like_queries(data):
        raise InputError(str(path), "is a benchmark query file, not a list of services",
                         hint="pass it to `a2x-local eval --queries` instead")
    raise InputError(str(path), "cannot tell which service format this is",
                     hint="pass --format with one of: " + ", ".join(f for f in FORMATS if f != "auto"))


def _parse_file(path: Path, fmt: str, limits: Limits, server: str | None) -> tuple[str, list[Service]]:
    """(format, services) of one file; JSON is parsed once and its shape picks the format under "auto"."""
    if fmt == "auto" and path.suffix.lower() != ".json":
        fmt = detect_file(path, limits=limits)
    if fmt == skills.NAME:
        return fmt, skills.parse_files([path], limits)
    if fmt == "jsonl":
        return fmt, tabular.parse_jsonl(path, limits)
    if fmt == "csv":
        return fmt, tabular.parse_csv(path, limits)
    data = read_json(path, limits)
    if fmt == "auto":
        fmt = detect_file(path, data, limits)
    module = {m.NAME: m for m in _JSON_FORMATS}[fmt]
    if not module.matches(data) and fmt != service_list.NAME:
        raise InputError(str(path), f"does not look like {fmt} ({module.SUMMARY})", hint=FORMAT_HINT)
    return fmt, module.parse(path, data, limits, server=server)


def read_path(path: Path, fmt: str = "auto", limits: Limits | None = None, server: str | None = None,
              skipped: list[Skipped] | None = None) -> list[tuple[Path, str, list[Service]]]:
    """Read one file or folder into (file, format, services) groups; raises on the first bad entry. The entries of a
    folder that were not read are added to ``skipped``, with the reason."""
    limits = limits or Limits.defaults()
    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}",
                        hint="`a2x-local ingest --help` describes each format; auto detects it from the file")
    check_name(path)
    if not path.exists():
        raise InputError(str(path), "is a broken symbolic link" if path.is_symlink() else "no such file or folder",
                         hint="check the path")
    if path.is_dir():
        return _read_folder(path, fmt, limits, server, skipped if skipped is not None else [])
    detected, services = _parse_file(path, fmt, limits, server)
    return [(path, detected, services)]


def _read_folder(path: Path, fmt: str, limits: Limits, server: str | None,
                 skipped: list[Skipped]) -> list[tuple[Path, str, list[Service]]]:
    """Skills by their SKILL.md files; every other .json/.jsonl/.csv file on its own, outside skill folders (the
    other files of a skill's folder belong to the skill: they are not reported as skipped)."""
    walk = walk_files(path)
    every = walk.files
    skill_files = [p for p in every if p.name == SKILL_FILE] if fmt in ("auto", skills.NAME) else []
    skill_dirs = {file.parent for file in skill_files}

    def in_skill(entry: Path) -> bool:
        return bool(skill_dirs & set(entry.parents))

    skipped.extend(entry for entry in walk.skipped if not in_skill(Path(entry.path)))
    read = set(skill_files) if fmt == skills.NAME else {
        p for p in every if p.suffix.lower() in SERVICE_FILE_SUFFIXES and not in_skill(p)} | set(skill_files)
    skipped.extend(Skipped(str(p), f"not read as --format {fmt}") for p in every if p not in read and not in_skill(p))
    groups = []
    if skill_files:
        groups.append((path, skills.NAME, skills.parse_files(skill_files, limits)))
    if fmt == skills.NAME:
        if not skill_files:
            raise InputError(str(path), "contains no SKILL.md files",
                             hint="point at a folder of skills (each in its own folder with a SKILL.md), or use"
                             " another --format")
        return groups
    files = sorted(read - set(skill_files))
    for file in files:
        groups.extend(read_path(file, fmt, limits, server))
    if not groups:
        raise InputError(str(path), "contains no .json, .jsonl, .csv or SKILL.md files",
                         hint="point at the service files themselves, or at a folder that holds them")
    return groups


def read_paths(paths: Sequence[Path], fmt: str = "auto", limits: Limits | None = None, server: str | None = None,
               skipped: list[Skipped] | None = None) -> list[tuple[Path, str, list[Service]]]:
    groups = []
    for path in paths:
        groups.extend(read_path(Path(path), fmt, limits, server, skipped))
    return groups
