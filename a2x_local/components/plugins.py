"""Plug-ins: engines and search methods that other installed packages add, found through entry points.

A package declares them in its metadata (pyproject.toml):

    [project.entry-points."a2x_local.engines"]
    my-engine = "my_package.engine:factory"      # factory(model_ref, engine_config) -> Engine

    [project.entry-points."a2x_local.methods"]
    my-method = "my_package.method:SPEC"         # a2x_local.search.MethodSpec named "my-method"

`register_components` (this package) loads them once, beside the methods of the stages above search; `--engine
NAME` and `--method NAME` then pick them like the built-in ones. A plug-in engine's model is not checked as a local
folder (the factory checks what it needs). A plug-in that fails to load, or claims a name already taken, is skipped
with one warning line: a broken plug-in never stops the tool.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint, entry_points

from a2x_local.llm import register_engine
from a2x_local.search import MethodSpec, method_names, register_method

ENGINE_GROUP = "a2x_local.engines"
METHOD_GROUP = "a2x_local.methods"

log = logging.getLogger(__name__)
# (group, name) of the plug-ins this process registered: loading twice (two applications built) adds nothing.
_LOADED: set[tuple[str, str]] = set()


def load_plugins(found: Callable[[str], Iterable[EntryPoint]] | None = None) -> list[str]:
    """Register every engine and method plug-in not yet registered; returns a line per plug-in skipped.
    ``found(group)`` lists a group's entry points (default: the installed distributions', via importlib.metadata)."""
    listed = found or (lambda group: entry_points(group=group))
    problems = []
    for group, register in ((ENGINE_GROUP, _register_engine), (METHOD_GROUP, _register_method)):
        for point in listed(group):
            if (group, point.name) in _LOADED:
                continue
            try:
                register(point.name, point.load())
            except Exception as exc:  # a broken plug-in is reported and skipped, whatever it raised
                problem = f"plug-in '{point.name}' ({group} = {point.value}) not loaded: {exc}"
                log.warning("%s", problem)
                problems.append(problem)
                continue
            _LOADED.add((group, point.name))
    return problems


def _register_engine(name: str, factory: object) -> None:
    if not callable(factory):
        raise TypeError("an engine plug-in is a factory(model_ref, engine_config) -> Engine")
    register_engine(name, factory, local_model=False)


def _register_method(name: str, spec: object) -> None:
    if not isinstance(spec, MethodSpec):
        raise TypeError("a method plug-in is an a2x_local.search.MethodSpec")
    if spec.name != name:
        raise ValueError(f"the entry point is named '{name}' but its MethodSpec '{spec.name}'")
    if name in method_names():
        raise ValueError(f"a search method named '{name}' already exists")
    register_method(spec)
