"""Typed settings of the server, from the `[serve]` table (the packaged default.toml says what each key means)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from a2x_local.settings import SectionConfig


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
