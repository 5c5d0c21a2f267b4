"""The `[registry]` table: size limits of what a service and an input file may carry, how long to wait for a busy
database, and how much a sync may remove."""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict, Field, StrictBool

from a2x_local.settings import SectionConfig


class RegistryConfig(SectionConfig):
    """Every `[registry]` key; the packaged default.toml says what each one means."""

    model_config = ConfigDict(frozen=True)
    section: ClassVar[str] = "registry"

    max_description_chars: int = Field(ge=1, le=10_000_000)
    max_name_chars: int = Field(ge=1, le=100_000)
    lock_timeout_s: float = Field(ge=0, le=86400.0)
    sync_max_remove_share: float = Field(ge=0, le=1)
    checkpoint_wait_s: float = Field(ge=0, le=86400.0)
    max_metadata_bytes: int = Field(ge=2, le=268_435_456)
    max_file_bytes: int = Field(ge=1, le=17_179_869_184)
    max_json_depth: int = Field(ge=2, le=500)
    allow_lookalikes: StrictBool
