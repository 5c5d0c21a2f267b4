"""Batches of texts of similar length, so that padding does not cost more than batching saves.

A transformer encoder pads every text of a batch to the longest one. Search queries vary a lot (ToolRet's dev
queries: median 38 tokens, one in a hundred over 300), so a batch of 32 concurrent queries padded to its longest
one costs about three times the tokens it holds: on a CPU, where the cost follows the tokens, that made a batch of
32 queries cost more per query than 32 queries encoded one by one. Cutting the length-sorted texts wherever the
padding would pass a bound keeps most of what batching saves (one call for many texts) without that waste.
"""

from __future__ import annotations

from collections.abc import Sequence

# Padded tokens allowed per real token in a batch (1.25: at most a fifth of the work is padding).
DEFAULT_SLACK = 1.25


def length_batches(lengths: Sequence[int], max_batch: int, slack: float = DEFAULT_SLACK) -> list[list[int]]:
    """The indices of ``lengths`` in batches of at most ``max_batch``, shortest texts first, each batch's padded
    size (its count times its longest length) within ``slack`` times its real size."""
    if max_batch < 1:
        raise ValueError(f"max_batch must be at least 1, not {max_batch}")
    if slack < 1:
        raise ValueError(f"slack must be at least 1, not {slack}")
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    real = 0
    for index in order:
        length = max(1, lengths[index])
        # Sorted ascending, so the newcomer is the batch's longest: the batch would pad everything to it.
        if current and (len(current) == max_batch or (len(current) + 1) * length > slack * (real + length)):
            batches.append(current)
            current, real = [], 0
        current.append(index)
        real += length
    if current:
        batches.append(current)
    return batches
