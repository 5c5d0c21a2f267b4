"""Local LLM engines behind one batch-first interface with structured outputs and token accounting."""

from a2x_local.llm.accounting import CallStats, Usage
from a2x_local.llm.base import Engine
from a2x_local.llm.scripted import ScriptedEngine
from a2x_local.llm.types import (
    ChoiceConstraint,
    Constraint,
    JsonConstraint,
    RawOutput,
    RegexConstraint,
    Request,
    Result,
)

__all__ = [
    "CallStats",
    "ChoiceConstraint",
    "Constraint",
    "Engine",
    "JsonConstraint",
    "RawOutput",
    "RegexConstraint",
    "Request",
    "Result",
    "ScriptedEngine",
    "Usage",
]
