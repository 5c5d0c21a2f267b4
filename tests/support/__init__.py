"""Helpers shared by tests: builders of local test artefacts (no network, nothing committed)."""
