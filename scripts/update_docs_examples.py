#!/usr/bin/env python3
"""Rewrite the expected output of the docs' runnable examples (`<!-- docs-test -->` blocks) from what the commands
print now; `tests/test_docs_examples.py` then passes. Run it after changing what a command prints, and read the
diff: every change is a change users see. Prints JSON: the pages and how many commands changed on each."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.docs_examples import PAGES, ROOT, update


def main() -> int:
    pages = sys.argv[1:] or list(PAGES)
    print(json.dumps({page: update(ROOT / page) for page in pages}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
