"""The registry's life between builds: incremental placement into a new tree version, the nightly job (sync,
build or update, regression gate, activation, retention, report). Everything else in this package is private to it."""

from a2x_local.lifecycle.config import PLACEMENTS
from a2x_local.lifecycle.nightly import EXIT_CODES, NightlyRequest, run_nightly
from a2x_local.lifecycle.report import summary_rows
from a2x_local.lifecycle.update import run_update

__all__ = ["EXIT_CODES", "PLACEMENTS", "NightlyRequest", "run_nightly", "run_update", "summary_rows"]
