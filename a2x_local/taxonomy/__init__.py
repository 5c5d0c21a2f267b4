"""The category tree: building it with a model, storing versions of it, importing and exporting it.
Everything else in this package is private to it."""

from a2x_local.taxonomy.config import build_config
from a2x_local.taxonomy.export import to_dot, to_json
from a2x_local.taxonomy.importer import import_tree, read_tree_file, save_import
from a2x_local.taxonomy.lock import build_running
from a2x_local.taxonomy.report import summary_rows
from a2x_local.taxonomy.runner import run_build
from a2x_local.taxonomy.store import (
    activate,
    active_build_id,
    delete_build,
    get_build,
    list_builds,
    load_active_tree,
    load_tree,
    load_usage,
)
from a2x_local.taxonomy.types import Tree, TreeNode

__all__ = [
    "Tree",
    "TreeNode",
    "activate",
    "active_build_id",
    "build_config",
    "build_running",
    "delete_build",
    "get_build",
    "import_tree",
    "list_builds",
    "load_active_tree",
    "load_tree",
    "load_usage",
    "read_tree_file",
    "run_build",
    "save_import",
    "summary_rows",
    "to_dot",
    "to_json",
]
