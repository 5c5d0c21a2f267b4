"""Typed settings of the gateway, from the `[gateway]` table (the packaged default.toml says what each key means)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, StrictBool

from a2x_local.settings import SectionConfig


class GatewayConfig(SectionConfig):
    """Every `[gateway]` key: where the gateway file is, the session pool, the limits of a call, the audit."""

    section: ClassVar[str] = "gateway"

    file: str
    max_sessions_per_server: int = Field(ge=1, le=1024)
    max_calls_per_session: int = Field(ge=1, le=1024)
    idle_stop_s: float = Field(gt=0, le=86_400)
    start_timeout_s: float = Field(gt=0, le=3600)
    call_timeout_s: float = Field(gt=0, le=86_400)
    max_argument_bytes: int = Field(ge=2, le=268_435_456)
    max_result_bytes: int = Field(ge=1024, le=1_073_741_824)
    max_activated: int = Field(ge=1, le=4096)
    audit_retention_days: float = Field(ge=0, le=36_500)
    audit_text: StrictBool
    audit_text_chars: int = Field(ge=0, le=1_000_000)
    audit_flush_s: float = Field(gt=0, le=3600)
    audit_max_pending: int = Field(ge=1, le=10_000_000)
