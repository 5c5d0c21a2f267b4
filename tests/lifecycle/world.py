"""A small world for lifecycle tests: services named by domain and topic, and a scripted model that knows them.

Service ``weather-rain-3`` is called "weather rain tool 3". The rule designs categories by domain at the root, by
topic below, then by the parity of the number; it files every service under the categories that name it, walks a
request down to the children whose name is a word of the request, and selects the services whose domain and topic
are both words of the request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from a2x_local.llm import Request
from a2x_local.registry import Service
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.testing import categories_json

_LISTED = re.compile(r"^(\d+)\. ([^:]+):", re.MULTILINE)


def service(domain: str, topic: str, i: int, *, variant: str = "") -> Service:
    return Service(f"{domain}-{topic}-{i}", "generic", f"{domain} {topic} tool {i}",
                   f"Does {domain} {topic} things{variant}, variant {i}.")


def services(spec: dict[str, Sequence[str]], per_topic: int, *, start: int = 0) -> list[Service]:
    """``spec``: domain -> topics; ``per_topic`` services each, numbered from ``start``."""
    return [service(d, t, i) for d, topics in spec.items() for t in topics for i in range(start, start + per_topic)]


def parts(service_id: str) -> tuple[str, str, str]:
    """(domain, topic, parity): the three axes the rule splits by, in that order."""
    domain, topic, number = service_id.split("-")
    return domain, topic, "even" if int(number) % 2 == 0 else "odd"


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def world_config(**overrides) -> BuildConfig:
    values = {"leaf_max_services": 8, "max_depth": 3, "max_children": 8, "min_children": 2,
              "keyword_path_min_services": 1000, "keyword_merge": "stem", "assign_batch_size": 6,
              "cross_domain": False, "refine_passes": 1}
    values.update(overrides)
    return BuildConfig.defaults(**values)


class World:
    """The scripted model. ``lost`` names requests (words) the descent answers NONE for at the root."""

    def __init__(self, *, lost: Iterable[str] = ()) -> None:
        self.lost = set(lost)
        self.calls: list[str] = []

    def __call__(self, request: Request) -> str:
        context = request.context
        step = context.get("step") or context["call"]
        self.calls.append(step)
        return getattr(self, f"_{step}")(request, context)

    @staticmethod
    def _axis(service_ids: Sequence[str]) -> list[str]:
        for axis in range(3):
            values = sorted({parts(s)[axis] for s in service_ids})
            if len(values) > 1:
                return values
        return ["even", "odd"]

    def _design(self, request: Request, context: dict) -> str:
        return categories_json(self._axis(context["services"])[: context["max_children"]])

    def _validate(self, request: Request, context: dict) -> str:
        return json.dumps({"verdicts": [{"violations": []} for _ in context["categories"]]})

    def _refine(self, request: Request, context: dict) -> str:
        names = [n.lower() for n in context["categories"]]
        return categories_json(names, list(range(1, len(names) + 1)))

    def _assign(self, request: Request, context: dict) -> str:
        names = [n.lower() for n in context["categories"]]
        lines = []
        for k, service_id in enumerate(context["services"], start=1):
            hits = [str(i) for i, name in enumerate(names, start=1) if name in parts(service_id)]
            lines.append(f"{k}: {','.join(hits) if hits else 'NONE'}")
        return "\n".join(lines)

    def _descend(self, request: Request, context: dict) -> str:
        asked = words(context["query"])
        if asked & self.lost and context["node"] == "root":
            return "NONE"
        listed = _LISTED.findall(request.messages[-1]["content"])
        chosen = [number for number, name in listed if name.strip().lower() in asked]
        return ",".join(chosen[: context["max_items"]]) or "NONE"

    def _select(self, request: Request, context: dict) -> str:
        asked = words(context["query"])
        chosen = [str(k) for k, s in enumerate(context["options"], start=1) if set(parts(s)[:2]) <= asked]
        return ",".join(chosen[: context["max_items"]]) or "NONE"


# Three domains of two topics each: the registry the lifecycle tests grow and shrink.
BASE = {"weather": ["rain", "snow"], "travel": ["flight", "hotel"], "music": ["jazz", "rock"]}
# The build settings a command run in these tests must read from config.toml to build what World answers.
WORLD_KEYS = ("leaf_max_services", "max_depth", "max_children", "keyword_path_min_services", "keyword_merge",
              "assign_batch_size", "cross_domain", "refine_passes")


def write_world_config(home: Path, *, engine: str | None = None) -> None:
    """``home``/config.toml with the `[build]` keys of `world_config()`, for commands that load their settings
    (and `[engine] name`, when given)."""
    thresholds = world_config().thresholds()
    lines = [f"{k} = {str(thresholds[k]).lower() if isinstance(thresholds[k], bool) else repr(thresholds[k])}"
             for k in WORLD_KEYS]
    # The world's registry is so small that direct selection would send all of it to selection whole, and the
    # gate could not tell a tree that files services under the wrong categories from a good one.
    text = ("[build]\n" + "\n".join(lines) + "\n[search]\ndirect_select_below = 0\n"
            + (f'[engine]\nname = "{engine}"\n' if engine else ""))
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")
