"""Typed settings of the server, from the `[serve]` table (the packaged default.toml says what each key means)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from a2x_local.config_check import setting_file
from a2x_local.errors import UserError
from a2x_local.settings import DOCS_PAGE, SectionConfig, Settings


class ServeConfig(SectionConfig):
    """Every `[serve]` key: where to listen, how requests are batched, and the limits on what a client may ask."""

    section: ClassVar[str] = "serve"

    host: str = Field(min_length=1)
    port: int = Field(ge=0, le=65535)
    default_method: str = Field(min_length=1)
    batch_window_ms: float = Field(ge=0, le=60000.0)
    max_batch: int = Field(ge=1, le=100_000)
    llm_batch_concurrency: int = Field(ge=1, le=1024)
    retrieval_batch_concurrency: int = Field(ge=1, le=1024)
    engine_window_ms: float = Field(ge=0, le=60000.0)
    engine_max_prompts: int = Field(ge=1, le=1_000_000)
    request_timeout_s: float = Field(gt=0, le=86400.0)
    max_body_bytes: int = Field(ge=1024, le=268_435_456)
    max_query_chars: int = Field(ge=1, le=1_000_000)
    max_k: int = Field(ge=1, le=10_000)
    max_requests_per_call: int = Field(ge=1, le=1000)
    default_k: int = Field(ge=1, le=10_000)
    page_size: int = Field(ge=1, le=10_000)
    max_page: int = Field(ge=1, le=10_000)
    summary_chars: int = Field(ge=20, le=100_000)
    preload: list[str]
    reload_lock_wait_s: float = Field(ge=0, le=3600.0)
    loading_wait_s: float = Field(ge=0, le=3600.0)
    rebuild_wait_s: float = Field(ge=0, le=3600.0)

    @model_validator(mode="after")
    def _consistent(self) -> ServeConfig:
        if self.default_k > self.max_k:
            raise ValueError(f"default_k ({self.default_k}) must not exceed max_k ({self.max_k})")
        if self.page_size > self.max_page:
            raise ValueError(f"page_size ({self.page_size}) must not exceed max_page ({self.max_page})")
        return self


def check_methods(settings: Settings, config: ServeConfig) -> None:
    """`default_method` and `preload` name methods this process can make, checked when a server starts: the
    methods are known only then (plug-ins and the stages above search register theirs in the composition root,
    `a2x_local.components.register_components`), so the table's model cannot check them when it is read. Without
    this, a misspelt default method would be blamed on every client whose request names none."""
    from a2x_local.search import method_names

    known = method_names()
    problems: list[str] = []
    if config.default_method not in known:
        problems.append(_where(settings, "default_method") + f"[serve] default_method: unknown search method "
                        f"{config.default_method!r}")
    unknown = [(index, name) for index, name in enumerate(config.preload) if name not in known]
    if unknown:
        named = ", ".join(f"preload[{index}] {name!r}" for index, name in unknown)
        problems.append(_where(settings, "preload") + f"[serve] {named}: unknown search "
                        f"method{'s' if len(unknown) > 1 else ''}")
    if problems:
        raise UserError("invalid configuration: " + "; ".join(problems), code="ConfigError",
                        hint=f"the methods this installation has: {', '.join(known)} (a plug-in's methods count once "
                        f"its package is installed and loads); fix the value in the file named ({DOCS_PAGE}, "
                        "[serve])")


def _where(settings: Settings, key: str) -> str:
    path = setting_file(settings, "serve", key)
    return f"{path}: " if path is not None else ""
