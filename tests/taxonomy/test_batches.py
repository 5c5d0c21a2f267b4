"""Content-defined batch boundaries: one added or removed service changes only the batches around it."""

from __future__ import annotations

from a2x_local.taxonomy.induction.calls import chunks

ITEMS = [f"service_{i:04d}" for i in range(600)]


def test_batches_keep_their_bounds():
    for size in (6, 15, 50):
        batches = chunks(ITEMS, size, "content")
        assert [item for batch in batches for item in batch] == ITEMS
        assert all(len(batch) <= size for batch in batches)
        assert all(len(batch) >= (size + 1) // 2 for batch in batches[:-1])
        assert len(ITEMS) / size < len(batches) < 2 * len(ITEMS) / size
    assert chunks(ITEMS, 5, "content") == chunks(ITEMS, 5, "fixed")       # too small to choose boundaries


def test_an_insertion_changes_a_few_batches_not_every_later_one():
    for size in (15, 50):
        before = {tuple(batch) for batch in chunks(ITEMS, size, "content")}
        changed = [*ITEMS[:100], "service_new", *ITEMS[100:]]
        after = {tuple(batch) for batch in chunks(changed, size, "content")}
        assert len(after - before) <= 3, size
        fixed_before = {tuple(batch) for batch in chunks(ITEMS, size, "fixed")}
        fixed_after = {tuple(batch) for batch in chunks(changed, size, "fixed")}
        assert len(fixed_after - fixed_before) > len(ITEMS[100:]) // size - 1      # every later batch shifts
