"""The method options a command offers as flags of their own; every other option goes through `-o KEY=VALUE`.

Each is a configured setting made optional (a2x_local/overrides.py): its type, choices and bounds are the
`[retrieval]` or `[search]` field's, and the CLI generates the flag from this model (cli/options.py).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from a2x_local.overrides import overrides_of
from a2x_local.search.llm.config import PRESETS_TABLE, LlmSearchConfig
from a2x_local.search.retrieval.config import RetrievalConfig
from a2x_local.settings import packaged_defaults

_SEARCH = overrides_of(LlmSearchConfig)
_RETRIEVAL = overrides_of(RetrievalConfig)
# The packaged presets' names, as the flag's value shows them (a config file may add more).
_PRESETS = "|".join(packaged_defaults()[PRESETS_TABLE])


class MethodFlags(BaseModel):
    """Options of the search methods that have a flag of their own, in `--help` order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    embedding_model: _RETRIEVAL.embedding_model = Field(None, json_schema_extra={"metavar": "NAME"}, description=(
        "Embedding model of dense and hybrid (default: the registry's setting)."))
    text: _RETRIEVAL.text = Field(None, description="Indexed text of the retrieval methods (default: `text` in "
                                                     "[retrieval]).")
    preset: _SEARCH.preset = Field(None, json_schema_extra={"metavar": _PRESETS}, description=(
        "LLM methods: settings of the token levers, a [search_presets.NAME] table (default: `preset` in [search]; "
        "lean for engines billed per prompt token)."))
