"""The answer cache: greedy answers by (model, answer-changing settings, constraint, budget, prompt) in the registry
file, read back instead of re-sent, counted apart from the prompts sent, and a rebuild that sends nothing new."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from a2x_local.db import connect
from a2x_local.llm import JsonConstraint, RegexConstraint, Request, with_answer_cache
from a2x_local.llm.cache import AnswerCache, CachedEngine, answer_key, engine_identity
from a2x_local.settings import load_settings
from a2x_local.taxonomy import load_usage
from a2x_local.taxonomy.induction.runner import run_build
from a2x_local.testing import ScriptedEngine
from tests.lifecycle.world import world_config
from tests.support.registries import make_registry
from tests.taxonomy.helpers import synthetic
from tests.taxonomy.rules import DomainRule


class Counted:
    """A rule that answers the number of the request's text and counts how often it was asked."""

    def __init__(self, answer: str = "7") -> None:
        self.answer = answer
        self.asked: list[str] = []

    def __call__(self, request: Request) -> str:
        self.asked.append(request.messages[-1]["content"])
        return self.answer


class Pair(BaseModel):
    a: int


def ask(text: str, **kwargs) -> Request:
    kwargs.setdefault("constraint", RegexConstraint("[0-9]+"))
    return Request([{"role": "user", "content": text}], label=kwargs.pop("label", "assign"), **kwargs)


@pytest.fixture
def cache(db_path):
    with connect(db_path):
        pass   # creates and migrates the file
    return AnswerCache(db_path)


def test_a_repeated_prompt_is_answered_from_the_cache_and_counted_apart(cache):
    rule = Counted()
    engine = CachedEngine(ScriptedEngine(rule), cache)
    first = engine.generate([ask("one"), ask("two")])
    assert [r.value for r in first] == ["7", "7"] and not any(r.cached for r in first)
    sent = engine.usage.total()
    again = engine.generate([ask("two"), ask("three"), ask("one")])
    assert rule.asked == ["one", "two", "three"]                    # only the new prompt reached the model
    assert [r.cached for r in again] == [True, False, True] and [r.value for r in again] == ["7", "7", "7"]
    assert again[0].prompt_tokens == 0 and again[0].attempts == 0
    stats = engine.usage.by_label["assign"]
    assert stats.calls == 3 and stats.cached == 2
    assert stats.cached_prompt_tokens == sent.prompt_tokens         # what the two cached answers cost when sent
    assert engine.usage.rounds == 2                                 # a round of cached answers is no engine round
    assert cache.size() == 3


def test_every_part_of_the_key_matters(cache):
    rule = Counted()
    engine = CachedEngine(ScriptedEngine(rule), cache)
    base = ask("same")
    engine.generate([base])
    engine.generate([ask("same", max_tokens=base.max_tokens + 1)])
    engine.generate([ask("same", constraint=RegexConstraint("[0-9]"))])
    engine.generate([Request([{"role": "system", "content": "x"}, {"role": "user", "content": "same"}],
                             RegexConstraint("[0-9]+"), label="assign")])
    assert len(rule.asked) == 4
    other_model = CachedEngine(ScriptedEngine(Counted(), context_window=1024), cache)
    other_model.describe = lambda: {"engine": "scripted", "model": "another"}   # a different model, same prompt
    other_model.inner.describe = other_model.describe
    other_model.generate([base])
    assert other_model.usage.total().cached == 0
    # The label (call type) is not part of the key: the same prompt is the same question.
    engine.generate([ask("same", label="descend")])
    assert len(rule.asked) == 4 and engine.usage.by_label["descend"].cached == 1


def test_only_deterministic_first_attempt_answers_are_kept(cache):
    warm = Counted()
    engine = CachedEngine(ScriptedEngine(warm), cache)
    engine.generate([ask("warm", temperature=0.7)])
    engine.generate([ask("warm", temperature=0.7)])
    assert len(warm.asked) == 2 and cache.size() == 0

    class FirstInvalid:
        def __init__(self) -> None:
            self.calls = 0

        def __call__(self, request: Request) -> str:
            self.calls += 1
            return "x" if self.calls == 1 else "5"

    rule = FirstInvalid()
    engine = CachedEngine(ScriptedEngine(rule), cache)
    [retried] = engine.generate([ask("flaky")])
    assert retried.ok and retried.attempts == 2 and cache.size() == 0    # a warmer retry is not reproducible
    engine.generate([ask("flaky")])
    assert rule.calls == 3


def test_json_answers_are_validated_again_when_read(cache):
    engine = CachedEngine(ScriptedEngine(lambda request: '{"a": 3}'), cache)
    request = ask("json", constraint=JsonConstraint(Pair), max_tokens=20)
    engine.generate([request])
    [cached] = engine.generate([request])
    assert cached.cached and cached.value == Pair(a=3)


def test_no_cache_asks_again_and_refreshes_the_stored_answer(cache):
    engine = CachedEngine(ScriptedEngine(Counted("1")), cache)
    engine.generate([ask("q")])
    fresh = CachedEngine(ScriptedEngine(Counted("2")), cache, read=False)
    [answer] = fresh.generate([ask("q")])
    assert answer.value == "2" and not answer.cached
    [reread] = CachedEngine(ScriptedEngine(Counted("3")), cache).generate([ask("q")])
    assert reread.cached and reread.value == "2"


def test_unused_answers_expire(cache, db_path):
    engine = CachedEngine(ScriptedEngine(Counted()), cache)
    engine.generate([ask("old"), ask("new")])
    with connect(db_path) as con:
        con.execute("UPDATE llm_cache SET used_at = TIMESTAMP '2020-01-01' WHERE key = ?",
                    [answer_key(engine.identity(), ask("old"))])
    assert cache.prune(0) == 0 and cache.size() == 2                   # 0 keeps everything
    assert cache.prune(30) == 1 and cache.size() == 1


def test_identity_leaves_out_settings_that_cannot_change_an_answer():
    engine = ScriptedEngine(Counted())
    engine.describe = lambda: {"engine": "vllm", "model": "m", "dtype": "bfloat16", "max_model_len": 8192,
                               "gpu_memory_utilization": 0.9, "tensor_parallel_size": 2, "seed": 0}
    assert engine_identity(engine) == {"engine": "vllm", "model": "m", "dtype": "bfloat16"}


def test_the_cache_follows_the_configuration(db_path, home):
    settings = load_settings(db=db_path)
    engine = ScriptedEngine(Counted())
    assert isinstance(with_answer_cache(engine, settings), CachedEngine)
    (home / "config.toml").parent.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[cache]\nenabled = false\n", encoding="utf-8")
    assert with_answer_cache(engine, load_settings(db=db_path)) is engine


def test_a_rebuild_of_an_unchanged_registry_sends_no_prompt(db_path):
    make_registry(db_path, synthetic(["weather", "travel", "music"], 10))
    config = world_config(leaf_max_services=12)
    cache = AnswerCache(db_path)
    first_engine = CachedEngine(ScriptedEngine(DomainRule()), cache)
    first = run_build(load_settings(db=db_path), lambda: first_engine, config=config, model="scripted")
    second_engine = CachedEngine(ScriptedEngine(DomainRule()), cache)
    second = run_build(load_settings(db=db_path), lambda: second_engine, config=config, model="scripted")
    sent, saved = first.report["usage"]["total"], second.report["usage"]["total"]
    assert sent["calls"] > 0 and saved["calls"] == 0 and second.report["engine_rounds"] == 0
    assert saved["cached"] == sent["calls"] and saved["cached_prompt_tokens"] == sent["prompt_tokens"]
    assert second.tree.to_nested() == first.tree.to_nested()
    with connect(db_path) as con:
        stored = load_usage(con, second.build_id).total()
    assert (stored.calls, stored.cached, stored.cached_prompt_tokens) == (0, sent["calls"], sent["prompt_tokens"])
