"""Where the tests' data lives: all of it inside this repository (data/ and tests' own fixtures)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
SAMPLE = DATA / "sample"
SAMPLE_QUERIES = DATA / "sample_queries.json"
TOOLRET = DATA / "toolret"
TOOLRET_ZH = DATA / "toolret_zh"
PUBLICMCP = DATA / "publicmcp"
A2A = DATA / "a2a"
SKILLS = DATA / "skills"
REGISTRY_FIXTURES = ROOT / "tests" / "registry" / "fixtures"
