"""Typed settings of the retrieval baselines, read from the `[retrieval]` table of the configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from a2x_local.llm import EmbeddingAlias
from a2x_local.settings import SectionConfig, Settings

TextField = Literal["name_description", "description"]


class TextOptions(BaseModel):
    """What text stands for a service in an index; part of every index key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: TextField = "name_description"
    params: bool = False
    body: bool = False

    def key(self) -> str:
        return f"{self.text}|params={int(self.params)}" + ("|body=1" if self.body else "")


class RetrievalConfig(SectionConfig):
    """Every `[retrieval]` key; the packaged default.toml says what each one means."""

    section: ClassVar[str] = "retrieval"

    embedding_model: str
    latin_embedding_model: str
    multilingual_embedding_model: str
    non_latin_threshold: float = Field(ge=0, le=1)
    text: TextField
    text_params: StrictBool
    text_body: StrictBool
    embed_batch_size: int = Field(ge=1, le=65_536)
    threads: int = Field(ge=0, le=4096)
    dense_index: Literal["auto", "flat", "hnsw", "ivfpq"]
    approximate_above: int = Field(ge=1, le=1_000_000_000)
    approximate_index: Literal["hnsw", "ivfpq"]
    ivf_lists: int = Field(ge=0, le=1_000_000)
    ivf_nprobe: int = Field(ge=1, le=1_000_000)
    pq_bytes: int = Field(ge=1, le=4096)
    rerank_factor: int = Field(ge=1, le=10_000)
    hnsw_m: int = Field(ge=4, le=512)
    hnsw_ef_construction: int = Field(ge=8, le=100_000)
    hnsw_ef_search: int = Field(ge=8, le=100_000)
    gpu: Literal["auto", "off"]
    bm25_method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"]
    bm25_k1: float = Field(gt=0, le=100.0)
    bm25_b: float = Field(ge=0, le=1)
    bm25_stopwords: Literal["en", "none"]
    bm25_stemmer: str
    split_identifiers: StrictBool
    cjk_bigrams: StrictBool
    rrf_k: float = Field(gt=0, le=1000000.0)
    dense_weight: float = Field(ge=0, le=1000.0)
    bm25_weight: float = Field(ge=0, le=1000.0)
    cross_script_bm25_factor: float = Field(ge=0, le=1)
    fusion_depth: int = Field(ge=0, le=1_000_000)
    default_k: int = Field(ge=1, le=100_000)
    embedding_models: dict[str, EmbeddingAlias]

    def text_options(self) -> TextOptions:
        return TextOptions(text=self.text, params=self.text_params, body=self.text_body)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> Self:
        """The table as every stage's is built (see `SectionConfig.from_settings`), with the embedding aliases'
        relative paths taken from the settings' models folder."""
        config = super().from_settings(settings, **overrides)
        models = {name: alias.model_copy(update={"path": str(settings.models_dir / alias.path)})
                  if alias.path and not Path(alias.path).expanduser().is_absolute() else alias
                  for name, alias in config.embedding_models.items()}
        return config.model_copy(update={"embedding_models": models})
