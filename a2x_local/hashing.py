"""Short, stable content hashes: the same value gives the same hash in every process and on every machine."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def stable_hash(value: Any, length: int = 16) -> str:
    """SHA-256 of ``value`` as canonical JSON (sorted keys), cut to ``length`` hex digits."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]
