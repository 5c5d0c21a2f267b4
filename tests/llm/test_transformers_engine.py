"""transformers + Outlines on the tiny random model: grouped batches, validation, counting, multi-item answers."""

from __future__ import annotations

import pytest

from a2x_local.llm import RegexConstraint, Request
from a2x_local.llm.config import EngineConfig, TransformersConfig
from a2x_local.llm.transformers_engine import TransformersEngine
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


def tiny_config(**changes) -> EngineConfig:
    backend = TransformersConfig.defaults(batch_size=BATCH, device="cpu")
    return EngineConfig.defaults(name="transformers", dtype="float32", max_model_len=1024,
                                 transformers=backend).model_copy(update=changes)


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    with TransformersEngine(tiny_model_dir, tiny_config(), model_label="tiny-qwen2") as engine:
        yield engine


def force(engine, monkeypatch) -> None:
    from tests.support.forcing import ForceTokensHF

    monkeypatch.setattr(engine, "logits_processors", lambda requests, width: [
        ForceTokensHF([r.context.get("force_tokens") for r in requests], width)])


def kinds_of_each_batch(engine, monkeypatch) -> list[list[str]]:
    """The constraint kinds of every `model.generate` batch the engine runs from now on (filled as it runs)."""
    chunks: list[list[str]] = []
    monkeypatch.setattr(engine, "batch_observers", [lambda requests: chunks.append([r.constraint.kind
                                                                                   for r in requests])])
    return chunks


def test_mixed_constraints_share_batches_and_all_validate(engine, monkeypatch) -> None:
    chunks = kinds_of_each_batch(engine, monkeypatch)
    # Interleaved kinds: each row carries its own grammar, so batches are simply chunks of batch_size, in order.
    per_kind = {kind: batch(kind) for kind in CASES}
    requests = [per_kind[kind][i] for i in range(BATCH) for kind in CASES]
    results = engine.generate(requests)
    assert [len(chunk) for chunk in chunks] == [BATCH] * len(CASES)
    assert all(set(chunk) == set(CASES) for chunk in chunks)
    for k, kind in enumerate(CASES):
        assert_valid(kind, results[k::len(CASES)])
    assert_token_counts(results, requests, engine.tokenizer)
    assert engine.usage.by_label["test-json"].calls == BATCH


def test_other_backends_group_requests_by_constraint(tiny_model_dir, monkeypatch) -> None:
    other = TransformersEngine(tiny_model_dir, tiny_config(structured_backend="xgrammar"))
    chunks = kinds_of_each_batch(other, monkeypatch)
    requests = [r for i in range(3) for r in (batch("regex", n=3)[i], batch("choice", n=3)[i])]
    results = other.generate(requests)
    assert sorted(chunks) == [["choice"] * 3, ["regex"] * 3]
    assert_valid("regex", results[0::2])
    assert_valid("choice", results[1::2])


def test_tiny_budget_is_reported_as_length_not_parsed(engine) -> None:
    [result] = engine.generate([cut_off_request("test-cut")])
    assert_cut_off(result)
    assert engine.usage.by_label["test-cut"].failures == 1


def test_scripted_multi_item_answer_passes_the_constraint_unchanged(engine, monkeypatch) -> None:
    force(engine, monkeypatch)
    requests, forced = scripted_requests(engine.tokenizer)
    results = engine.generate(requests)
    assert [(r.value, r.finish_reason, r.attempts) for r in results] == [(SCRIPTED, "stop", 1)] * 2
    assert results[0].completion_tokens == len(forced)


def test_the_forcing_check_catches_the_backend_that_never_emits_the_comma(tiny_model_dir, monkeypatch) -> None:
    # Outlines' own default (outlines_core) refuses the comma once "2" could end the answer: the same forced
    # answer comes back changed, which is why the default is guidance (llguidance).
    flawed = TransformersEngine(tiny_model_dir, tiny_config(structured_backend="outlines"))
    force(flawed, monkeypatch)
    requests, _ = scripted_requests(flawed.tokenizer)
    texts = [r.text for r in flawed.generate(requests)]
    assert all("," not in text for text in texts), texts


def test_long_prompt_fails_alone(engine) -> None:
    too_long = Request([{"role": "user", "content": "word " * 2000}], RegexConstraint("[0-9]+"), label="test-bad")
    fine = Request(messages(3), RegexConstraint("[0-9]{1,3}"), max_tokens=8, label="test-bad")
    results = engine.generate([too_long, fine])
    assert results[0].finish_reason == "error" and "max_model_len" in results[0].error
    assert results[1].ok
    assert engine.describe()["max_model_len"] == 1024


def test_a_folder_without_weights_is_a_user_error(tiny_model_dir, tmp_path) -> None:
    import shutil

    from a2x_local.errors import UserError

    broken = tmp_path / "no-weights"
    shutil.copytree(tiny_model_dir, broken, ignore=shutil.ignore_patterns("*.safetensors"))
    with pytest.raises(UserError) as caught:
        TransformersEngine(broken, tiny_config())
    assert str(broken) in caught.value.message and "models check" in caught.value.hint
