"""Prompts are data: the one loader every stage uses for its `prompts/` folder of Markdown files.

A call-type file holds the system message, a line `<<<USER>>>`, then the user message. The system part depends only
on build- or mode-wide values (shared instructions first, so an engine's prefix cache serves it once); the user part
carries the per-request text. A fragment is a file without the separator, inserted whole into system messages.
Placeholders are `$name` (string.Template), so JSON braces and service text never need escaping, and values are
inserted as text, never parsed as templates themselves.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from functools import cached_property, lru_cache
from importlib import resources
from string import Template

SEPARATOR = "<<<USER>>>"
# Fragments every book offers to its system parts (`$data_rule`: service text is data, never instructions).
SHARED_FRAGMENTS = ("data_rule",)


class PromptBook:
    """The prompt files of one package's `prompts/` folder, read once, checked for completeness, hashed."""

    def __init__(self, package: str, *, call_types: Sequence[str], fragments: Sequence[str] = ()) -> None:
        self.package = package
        self.call_types = tuple(call_types)
        self.fragments = tuple(fragments)
        # Per instance, so two books never share entries; bounded because system values are few per process.
        self._system = lru_cache(maxsize=256)(self._system_text)

    @cached_property
    def files(self) -> dict[str, str]:
        """Every prompt file's text by name (without `.md`)."""
        shared = resources.files("a2x_local.defaults") / "prompts"
        files = {name: (shared / f"{name}.md").read_text(encoding="utf-8") for name in SHARED_FRAGMENTS}
        folder = resources.files(self.package) / "prompts"
        files.update({entry.name[:-3]: entry.read_text(encoding="utf-8") for entry in folder.iterdir()
                      if entry.name.endswith(".md")})
        missing = [name for name in (*self.call_types, *self.fragments) if name not in files]
        if missing:
            raise RuntimeError(f"prompt files missing from {self.package}: {missing}")
        broken = [name for name in self.call_types if SEPARATOR not in files[name]]
        if broken:
            raise RuntimeError(f"prompts of {self.package} lack the {SEPARATOR} line: {broken}")
        return files

    def hash(self) -> str:
        """SHA-256 over the names and texts of every file: a changed prompt is a changed build or search setting."""
        digest = hashlib.sha256()
        for name, text in sorted(self.files.items()):
            digest.update(f"{name}\x00{text}\x00".encode())
        return digest.hexdigest()

    def fragment(self, name: str) -> str:
        """A file's whole text, stripped (a fragment, or a mode's instructions)."""
        return self.files[name].strip()

    def fill(self, name: str, **values: object) -> str:
        """A fragment with its ``$placeholders`` filled (every one must be given)."""
        return Template(self.fragment(name)).substitute(values)

    def _parts(self, call_type: str) -> tuple[Template, Template]:
        system, user = self.files[call_type].split(SEPARATOR, 1)
        return Template(system.strip()), Template(user.strip())

    def _system_text(self, call_type: str, values: tuple[tuple[str, str], ...]) -> str:
        merged = {name: self.fragment(name) for name in (*SHARED_FRAGMENTS, *self.fragments)}
        merged.update(values)
        return self._parts(call_type)[0].substitute(merged)

    def render(self, call_type: str, *, system: Mapping[str, object] | None = None,
               **user: object) -> list[dict[str, str]]:
        """Chat messages for one request: ``system`` fills the shared part, ``user`` the per-request part."""
        values = tuple(sorted((key, str(value)) for key, value in (system or {}).items()))
        return [
            {"role": "system", "content": self._system(call_type, values)},
            {"role": "user", "content": self._parts(call_type)[1].substitute({k: str(v) for k, v in user.items()})},
        ]
