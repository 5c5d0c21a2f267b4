"""The project's scripts/ loaded as modules, for tests of what they generate."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.paths import ROOT


def load_script(name: str) -> ModuleType:
    """``scripts/NAME.py`` as a module (registered in sys.modules: dataclasses in it look their module up)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
