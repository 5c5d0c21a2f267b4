"""The category tree: building it with a model, storing versions of it, importing and exporting it."""

from a2x_local.taxonomy.types import ROOT_ID, Tree, TreeNode, TreeStats, child_id

__all__ = ["ROOT_ID", "Tree", "TreeNode", "TreeStats", "child_id"]
