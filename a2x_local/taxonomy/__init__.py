"""The category tree: building it with a model, storing versions of it, importing and exporting it.
Everything else in this package is private to it."""

from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.diff import diff_trees
from a2x_local.taxonomy.export import to_dot, to_json
from a2x_local.taxonomy.importer import import_tree, read_tree_file, save_import
from a2x_local.taxonomy.induction.report import summary_rows
from a2x_local.taxonomy.induction.resplit import overfull_leaves, resplit_nodes
from a2x_local.taxonomy.induction.runner import run_build
from a2x_local.taxonomy.lock import BuildLock, DatabaseLock, build_running
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
from a2x_local.taxonomy.versions import save_version

__all__ = [
    "BuildConfig",
    "BuildLock",
    "DatabaseLock",
    "Tree",
    "TreeNode",
    "activate",
    "active_build_id",
    "build_running",
    "delete_build",
    "diff_trees",
    "get_build",
    "import_tree",
    "list_builds",
    "load_active_tree",
    "load_tree",
    "load_usage",
    "overfull_leaves",
    "read_tree_file",
    "resplit_nodes",
    "run_build",
    "save_import",
    "save_version",
    "summary_rows",
    "to_dot",
    "to_json",
]
