"""Agent Skills: `SKILL.md` files with YAML front matter (`name`, `description`): one service per skill."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from a2x_local.errors import InputError
from a2x_local.jsonfiles import check_depth, read_text
from a2x_local.registry.formats._common import EntryReader, Limits
from a2x_local.registry.types import Service

NAME = "skills"
SUMMARY = "a folder of SKILL.md files with YAML front matter (name, description)"
BODY_EXCERPT_CHARS = 2000


class _NoAliasLoader(yaml.SafeLoader):
    """YAML's safe loader without aliases: `*name` can multiply a few hundred bytes into gigabytes (an alias bomb),
    and front matter has no use for them."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not accepted in front matter",
                                              event.start_mark)
        return super().compose_node(parent, index)


SKILL_HINT = ("a SKILL.md starts with YAML front matter between two '---' lines, with name and description"
              " (docs/registry.md)")


def _front_matter(path: Path, text: str, limits: Limits) -> tuple[dict[str, Any], str]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise InputError(str(path), "has no YAML front matter (the file must start with a '---' line)", hint=SKILL_HINT)
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration as exc:
        raise InputError(str(path), "front matter is not closed by a '---' line", hint=SKILL_HINT) from exc
    try:
        meta = yaml.load("\n".join(lines[1:end]), Loader=_NoAliasLoader)  # a SafeLoader, minus aliases
    except RecursionError as exc:
        raise InputError(str(path), "front matter is nested too deeply",
                         hint="flatten it, or raise [registry] max_json_depth to accept it") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        raise InputError(str(path), f"front matter is not valid YAML{where}: {getattr(exc, 'problem', exc)}",
                         hint=SKILL_HINT) from exc
    if not isinstance(meta, dict):
        raise InputError(str(path), "front matter must be a mapping of fields (name, description, ...)",
                         hint=SKILL_HINT)
    check_depth(meta, limits.max_json_depth, str(path), entry="front matter")
    return meta, "\n".join(lines[end + 1:]).strip()


def parse_files(files: list[Path], limits: Limits) -> list[Service]:
    services = []
    for file in files:
        meta, body = _front_matter(file, read_text(file, limits), limits)
        reader = EntryReader(file, "front matter", meta, limits)
        name = reader.text("name")
        reader.entry = f"skill {name!r}"
        extra = {k: v for k, v in meta.items() if k not in {"name", "description"}}
        services.append(reader.service(
            id=f"skill/{name.strip()}",
            type="skill",
            name=name,
            description=reader.text("description"),
            metadata={"path": str(file.resolve()), "front_matter": _plain(extra),
                      "body_excerpt": body[:BODY_EXCERPT_CHARS], "body_chars": len(body)},
        ))
    return services


def _plain(value: Any) -> Any:
    """YAML may carry dates and other non-JSON values; keep them as text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
