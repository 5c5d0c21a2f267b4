"""A method's options are validated once, at the edge they come in by, into the method's own options model, and that
object is what the method is built from (issue 35: before, they went options -> dict -> options -> dict on the
search path and were validated three times).

A method registered here counts its options model's validations and records the object its factory is handed; each
edge (the library call, the CLI's search and eval, compose's step method, the server) is driven once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, model_validator

from a2x_local.compose import open_composer
from a2x_local.llm import EngineOptions
from a2x_local.search import MethodSpec, make_method, method_options, register_method
from a2x_local.search.methods import unregister_method
from a2x_local.settings import Settings, load_settings

VALIDATED: list[dict[str, Any]] = []   # the values each validation of a counted options model was given
RECEIVED: list[BaseModel] = []         # the options object each factory call was handed


class CountedOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _counted(cls, values: Any) -> Any:
        VALIDATED.append(dict(values))
        return values


class CountedEngineOptions(EngineOptions, CountedOptions):
    """A method that takes the engine options (as the LLM methods and compose do)."""


def _factory(settings: Settings, db_path: Path, options: BaseModel, progress: Any) -> Any:
    RECEIVED.append(options)
    return make_method("bm25", settings, db_path, text=getattr(options, "text", None))


@pytest.fixture(autouse=True)
def counted() -> Iterator[None]:
    VALIDATED.clear()
    RECEIVED.clear()
    register_method(MethodSpec("counted", "bm25, counting its options' validations", CountedOptions, _factory,
                               engine="none", cost="retrieval"))
    register_method(MethodSpec("counted-engine", "the same, with engine options", CountedEngineOptions, _factory,
                               engine="optional", cost="retrieval"))
    yield
    unregister_method("counted")
    unregister_method("counted-engine")


def test_a_library_call_validates_once_and_typed_options_reach_the_method_as_they_are(settings: Settings):
    make_method("counted", settings, text="description")
    assert VALIDATED == [{"text": "description"}] and RECEIVED[-1].text == "description"
    typed = method_options("counted", {"text": "description", "unset": None})
    assert len(VALIDATED) == 2
    make_method("counted", settings, options=typed)
    assert len(VALIDATED) == 2 and RECEIVED[-1] is typed      # neither validated again nor copied
    with pytest.raises(TypeError, match="not the method's CountedOptions"):
        make_method("counted", settings, options=EngineOptions())


def test_the_cli_search_hands_the_method_the_object_it_validated_once(registry_db: Path, cli):
    code, out, err = cli("search", "weather forecast", "-m", "counted", "-o", "text=description", "--json")
    assert code == 0, err
    assert VALIDATED == [{"text": "description"}] and len(RECEIVED) == 1 and RECEIVED[0].text == "description"
    assert json.loads(out)["options"] == {"text": "description"}       # the options as given, shown as before


def test_the_engine_flags_join_the_object_without_a_second_validation(registry_db: Path, cli):
    code, _, err = cli("search", "weather forecast", "-m", "counted-engine", "-o", "text=description",
                       "--engine", "openai", "--model", "any")
    assert code == 0, err
    # The engine flags were checked as `EngineOptions`; the method's model validates only the method's own values.
    assert VALIDATED == [{"text": "description"}]
    [options] = RECEIVED
    assert isinstance(options, CountedEngineOptions)
    assert (options.text, options.engine, options.model) == ("description", "openai", "any")


def test_engine_flags_for_a_method_without_them_are_refused_as_before(registry_db: Path, cli):
    code, _, err = cli("search", "weather forecast", "-m", "counted", "--model", "any")
    assert code == 1 and "method 'counted': model: unknown option" in err and not RECEIVED


def test_eval_validates_once(registry_db: Path, cli, tmp_path: Path):
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps([{"id": "1", "query": "weather forecast for Berlin", "correct_tools": ["weather"]}]))
    code, _, err = cli("eval", "-q", queries, "-m", "counted", "-o", "text=description", "-k", "3", "--no-plots",
                       "--out", tmp_path / "run", "--json")
    assert code == 0, err
    assert VALIDATED == [{"text": "description"}] and len(RECEIVED) == 1


def test_compose_validates_its_step_method_s_options_once(registry_db: Path, cli):
    with open_composer(load_settings(db=registry_db), step_method="counted", method_options={"text": "description"},
                       decomposer="rule", start_engine=False):
        pass
    assert VALIDATED == [{"text": "description"}] and len(RECEIVED) == 1
    # compose as a search method: its own options model keeps the step method's options for that method to check.
    code, _, err = cli("search", "weather forecast, then a hotel", "-m", "compose", "-o", "step_method=counted",
                       "-o", "text=description")
    assert code == 0, err
    assert VALIDATED[1:] == [{"text": "description"}] and len(RECEIVED) == 2


def test_the_server_validates_once_per_build(registry_db: Path):
    from tests.serve.helpers import make_server

    server = make_server(registry_db)
    try:
        method = server.state.method("counted", server.state.current())
        assert VALIDATED == [{}] and len(RECEIVED) == 1
        assert server.state.method("counted", server.state.current()) is method and len(VALIDATED) == 1
    finally:
        server.close()
