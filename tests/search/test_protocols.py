"""The search method's contract, complete (issue 35): an abstract method with default `describe()`, `close()` and
`warm_up()`, a separate `Retriever` protocol (with its name) for ranked retrieval, and no caller probing a method or
a retriever for what it offers."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from a2x_local.errors import UserError
from a2x_local.search import (
    Hit,
    MethodSpec,
    Retriever,
    SearchAnswer,
    SearchMethod,
    SearchRequest,
    make_retriever,
    register_method,
)
from a2x_local.search.methods import unregister_method
from a2x_local.search.retrieval.config import RetrievalConfig
from a2x_local.search.retrieval.corpus import Corpus
from a2x_local.search.retrieval.retrievers import RetrieverMethod
from a2x_local.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
CALLERS = ("search", "serve", "evaluation", "compose")


class Echo(SearchMethod):
    name = "echo"

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        return [SearchAnswer(query=r.query, hits=[Hit(r.query)], ranked=True) for r in requests]


class EchoRetriever(Echo):
    name = "echo-retriever"

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.asked.append(list(queries))
        return [[Hit(query)] for query in queries]


class _NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


def test_a_method_gets_describe_and_close_by_default_and_must_answer_search_batch():
    method = Echo()
    assert method.describe() == {"method": "echo"} and method.ranked
    assert method.close() is None and method.warm_up() is None
    with pytest.raises(TypeError, match="search_batch"):
        type("Mute", (SearchMethod,), {})()


def test_a_retriever_is_told_apart_by_its_protocol(tmp_path: Path):
    assert isinstance(EchoRetriever(), Retriever) and not isinstance(Echo(), Retriever)
    for name, made in (("echo", Echo), ("echo-retriever", EchoRetriever)):
        register_method(MethodSpec(name, "test", _NoOptions, lambda *args, made=made: made(), engine="none",
                                   cost="retrieval"), replace=True)
    try:
        settings = load_settings(db=tmp_path / "r.duckdb")
        assert isinstance(make_retriever("echo-retriever", settings), EchoRetriever)
        with pytest.raises(UserError, match="method 'echo' is not a retriever"):
            make_retriever("echo", settings)
    finally:
        unregister_method("echo")
        unregister_method("echo-retriever")


def test_a_retriever_method_warms_up_with_one_query_and_says_its_name(tmp_path: Path):
    class Counting(RetrieverMethod):
        name = "counting"

        def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
            self.asked = (list(queries), k)
            return [[] for _ in queries]

    method = Counting(Corpus(tmp_path / "r.duckdb", [], "", None), RetrievalConfig.defaults())
    method.warm_up()
    assert method.asked == (["warm-up query"], 1) and isinstance(method, Retriever) and method.name == "counting"


def _probes(path: Path) -> list[str]:
    """getattr/hasattr calls on a method, a retriever or a ranker (a name ending so), or asking for a method's
    parts."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2):
            continue
        target, attribute = ast.unparse(node.args[0]), node.args[1]
        asked = attribute.value if isinstance(attribute, ast.Constant) else ""
        if re.search(r"(method|retriever|ranker|query_model)$", target) or asked in (
                "describe", "close", "warm_up", "retrieve", "ranked", "search_batch", "runtime"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_caller_probes_a_method_for_what_it_offers():
    found = [hit for stage in CALLERS for path in sorted((ROOT / "a2x_local" / stage).rglob("*.py"))
             for hit in _probes(path)]
    assert found == [], "\n".join(found)
