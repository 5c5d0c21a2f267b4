"""Typed settings of the server, from the `[serve]` table (the packaged default.toml says what each key means)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from a2x_local.settings import SectionConfig


class ServeConfig(SectionConfig):
    """Every `[serve]` key: where to listen, how requests are batched, and the limits on what a client may ask."""

    section: ClassVar[str] = "serve"

    host: str = Field(min_length=1)
    port: int = Field(ge=0, le=65535)
    default_method: str = Field(min_length=1)
    batch_window_ms: float = Field(ge=0)
    max_batch: int = Field(ge=1)
    llm_batch_concurrency: int = Field(ge=1)
    retrieval_batch_concurrency: int = Field(ge=1)
    engine_window_ms: float = Field(ge=0)
    engine_max_prompts: int = Field(ge=1)
    request_timeout_s: float = Field(gt=0)
    max_body_bytes: int = Field(ge=1024)
    max_query_chars: int = Field(ge=1)
    max_k: int = Field(ge=1)
    max_requests_per_call: int = Field(ge=1)
    default_k: int = Field(ge=1)
    page_size: int = Field(ge=1)
    max_page: int = Field(ge=1)
    summary_chars: int = Field(ge=20)
    preload: list[str]
    reload_lock_wait_s: float = Field(ge=0)
    loading_wait_s: float = Field(ge=0)
    rebuild_wait_s: float = Field(ge=0)
