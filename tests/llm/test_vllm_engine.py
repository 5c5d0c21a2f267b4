"""The offline vLLM engine on the tiny random model (the session's shared engine)."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from a2x_local.errors import UserError
from a2x_local.llm import RegexConstraint, Request
from a2x_local.llm.config import EngineConfig
from a2x_local.llm.vllm_engine import VllmEngine
from a2x_local.settings import packaged_defaults
from tests.llm.engine_cases import (
    BATCH,
    CASES,
    SCRIPTED,
    assert_cut_off,
    assert_token_counts,
    assert_valid,
    batch,
    cut_off_request,
    messages,
    scripted_requests,
)

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_one_chat_call_answers_32_requests_of_each_kind_and_all_validate(vllm_engine, tokenizer, monkeypatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(vllm_engine, "chat_observers", [lambda requests, outputs: calls.append(len(requests))])
    before = vllm_engine.usage.snapshot()
    requests = [r for kind in CASES for r in batch(kind)]
    results = vllm_engine.generate(requests)
    assert calls == [len(requests)]
    for k, kind in enumerate(CASES):
        assert_valid(kind, results[k * BATCH:(k + 1) * BATCH])
    assert_token_counts(results, requests, tokenizer)
    used = vllm_engine.usage.since(before)
    assert used.rounds == 1
    for kind in CASES:
        stats = used.by_label[f"test-{kind}"]
        part = results[list(CASES).index(kind) * BATCH:][:BATCH]
        assert stats.calls == BATCH and stats.failures == 0
        assert stats.prompt_tokens == sum(r.prompt_tokens for r in part) > 0
        assert stats.completion_tokens == sum(r.completion_tokens for r in part) > 0


def test_engine_prompt_count_matches_what_the_model_was_sent(vllm_engine) -> None:
    [result] = vllm_engine.generate(batch("choice", n=1))
    assert vllm_engine.count_prompt_tokens(messages(0)) == result.prompt_tokens


def test_tiny_budget_is_reported_as_length_not_parsed(vllm_engine) -> None:
    before = vllm_engine.usage.snapshot()
    [result] = vllm_engine.generate([cut_off_request("test-cut")])
    assert_cut_off(result)
    stats = vllm_engine.usage.since(before).by_label["test-cut"]
    assert (stats.calls, stats.retries, stats.failures, stats.completion_tokens) == (2, 1, 1, 6)


def test_scripted_multi_item_answer_passes_the_constraint_unchanged(vllm_engine, tokenizer, monkeypatch) -> None:
    monkeypatch.setattr(vllm_engine, "extra_args", lambda request: {"force_tokens": request.context["force_tokens"]})
    requests, forced = scripted_requests(tokenizer)
    results = vllm_engine.generate(requests)
    assert [(r.value, r.finish_reason, r.attempts) for r in results] == [(SCRIPTED, "stop", 1)] * 2
    assert results[0].completion_tokens == len(forced)


def test_default_backend_is_guidance_everywhere(vllm_engine) -> None:
    assert packaged_defaults()["engine"]["structured_backend"] == "guidance"
    assert EngineConfig.defaults().structured_backend == "guidance"
    assert vllm_engine.config.structured_backend == "guidance"
    config = vllm_engine._llm.llm_engine.vllm_config.structured_outputs_config
    assert (config.backend, config.disable_any_whitespace, config.disable_additional_properties) == (
        "guidance", True, True)


def test_bad_requests_fail_alone_and_the_batch_goes_on(vllm_engine) -> None:
    too_long = Request([{"role": "user", "content": "word " * 40000}], RegexConstraint("[0-9]+"), label="test-bad")
    broken = Request(messages(0), RegexConstraint("[a-"), label="test-bad")
    fine = batch("regex", n=2)
    results = vllm_engine.generate([too_long, fine[0], broken, fine[1]])
    assert results[0].finish_reason == "error" and "max_model_len" in results[0].error
    assert "shorten the prompt or raise --max-model-len" in results[0].error
    assert results[2].finish_reason == "error" and "does not compile" in results[2].error
    assert results[1].ok and results[3].ok


def test_one_engine_per_process(vllm_engine, tiny_model_dir) -> None:
    assert VllmEngine.shared(tiny_model_dir, vllm_engine.config) is vllm_engine
    with pytest.raises(UserError, match="already running"):
        VllmEngine(tiny_model_dir, vllm_engine.config.model_copy(update={"max_model_len": 1024}))
    assert vllm_engine.describe()["structured_backend"] == "guidance"


def test_engine_start_survives_numba_loaded_first() -> None:
    """bm25s imports numba; vLLM's start-up walk over every module must not trip over llvmlite afterwards."""
    import bm25s  # noqa: F401  (loads numba and llvmlite, as the hybrid retriever does)
    from vllm.triton_utils.dispatcher import _rebind_kernels

    from a2x_local.llm.vllm_engine import _shield_llvmlite_from_kernel_scan

    _shield_llvmlite_from_kernel_scan()
    _rebind_kernels([(object(), object())])  # the same walk vLLM runs at start-up; it raised before the shield
    import llvmlite.binding.ffi as ffi

    assert vars(ffi.lib) == {}


def test_the_engine_reports_its_prefix_cache_hits_as_the_simulated_cache_counts_them(vllm_engine) -> None:
    from a2x_local.testing import PrefixCache

    block = vllm_engine._llm.llm_engine.vllm_config.cache_config.block_size
    # A prefix no other test sends (the session's engine keeps every test's prompts), a few blocks long.
    shared = "Reference catalogue 7f3a: " + " ".join(f"service{k} books rooms" for k in range(120))
    rounds = [[Request([{"role": "user", "content": f"{shared}\nRequest: {ask}"}], RegexConstraint("[0-9]"),
                       max_tokens=2, label="cache") for ask in asks] for asks in (["a hotel"], ["a flight", "a car"])]
    before = vllm_engine.usage.snapshot()
    simulated = PrefixCache(capacity_tokens=10**7, block_tokens=block)
    reported = []
    for requests in rounds:
        for request, result in zip(requests, vllm_engine.generate(requests), strict=True):
            assert result.prefix_cached_tokens == simulated.cached(vllm_engine.prompt_token_ids(request.messages))
            reported.append(result.prefix_cached_tokens)
    # The first prompt found nothing; the next two found the shared prefix, in whole blocks.
    assert reported[0] == 0 and all(count >= block and count % block == 0 for count in reported[1:])
    assert vllm_engine.usage.since(before).by_label["cache"].prefix_cached_tokens == sum(reported)
