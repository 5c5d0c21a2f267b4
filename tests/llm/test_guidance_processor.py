"""The eager bitmask application matches llguidance's reference (numpy) implementation bit for bit."""

from __future__ import annotations

import llguidance.numpy
import numpy as np
import pytest
import torch

from a2x_local.llm.guidance_processor import apply_bitmask


@pytest.mark.parametrize(("rows", "vocab", "mask_vocab"), [(3, 4096, 4096), (2, 1000, 1000), (4, 1100, 1000)])
def test_apply_bitmask_matches_llguidance(rows: int, vocab: int, mask_vocab: int) -> None:
    generator = np.random.default_rng(0)
    mask = generator.integers(-(2**31), 2**31 - 1, size=llguidance.numpy.get_bitmask_shape(rows, mask_vocab),
                              dtype=np.int64).astype(np.int32)
    logits = generator.standard_normal((rows, vocab)).astype(np.float32)
    expected = logits.copy()
    llguidance.numpy.apply_token_bitmask_inplace(expected, mask)
    actual = torch.from_numpy(logits.copy())
    apply_bitmask(actual, torch.from_numpy(mask))
    assert np.array_equal(actual.numpy(), expected)
    assert np.isinf(expected).any() and np.isfinite(expected).any()
