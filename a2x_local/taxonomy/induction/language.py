"""The language a build names its categories in (`[build] category_language`), for the build prompts.

"auto" follows the registry: a Chinese registry gets Chinese category names, so the names read like the services
they hold and a search query in the registry's language meets categories in the same language.
"""

from __future__ import annotations

from collections.abc import Sequence

from a2x_local.registry import Service, resolve_language
from a2x_local.taxonomy.config import BuildConfig


def category_language(config: BuildConfig, services: Sequence[Service]) -> str:
    """`category_language` as a language name: the setting itself, or for "auto" the main language of the services'
    names and descriptions (by script; "English" for English Latin-script text)."""
    return resolve_language(config.category_language, [f"{s.name}\n{s.description}" for s in services])


def with_category_language(config: BuildConfig, services: Sequence[Service]) -> BuildConfig:
    """``config`` with `category_language` resolved from ``services`` (unchanged without any), so a build, its
    resume and a later re-split of its leaves all write categories in the same, named language."""
    if not services:
        return config
    return config.model_copy(update={"category_language": category_language(config, services)})
