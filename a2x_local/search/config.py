"""Typed settings of the retrieval baselines, read from the `[retrieval]` table of the configuration."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from a2x_local.settings import Settings, section_config

TextField = Literal["name_description", "description"]


class TextOptions(BaseModel):
    """What text stands for a service in an index; part of every index key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: TextField = "name_description"
    params: bool = False

    def key(self) -> str:
        return f"{self.text}|params={int(self.params)}"


class RetrievalConfig(BaseModel):
    """Every `[retrieval]` key; see configs/default.toml for what each one means."""

    model_config = ConfigDict(extra="forbid")

    embedding_model: str = "all-MiniLM-L6-v2"
    text: TextField = "name_description"
    text_params: bool = False
    query_prefix: str = ""
    passage_prefix: str = ""
    embed_batch_size: int = Field(64, ge=1)
    threads: int = Field(0, ge=0)
    approximate_above: int = Field(100000, ge=1)
    hnsw_m: int = Field(32, ge=4)
    hnsw_ef_construction: int = Field(200, ge=8)
    hnsw_ef_search: int = Field(256, ge=8)
    gpu: Literal["auto", "off"] = "auto"
    bm25_method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    bm25_k1: float = Field(1.5, gt=0)
    bm25_b: float = Field(0.75, ge=0, le=1)
    bm25_stopwords: Literal["en", "none"] = "en"
    bm25_stemmer: str = "english"
    split_identifiers: bool = True
    cjk_bigrams: bool = True
    rrf_k: float = Field(60, gt=0)
    fusion_depth: int = Field(1000, ge=0)
    default_k: int = Field(10, ge=1)

    def text_options(self) -> TextOptions:
        return TextOptions(text=self.text, params=self.text_params)


def retrieval_config(settings: Settings, **overrides: object) -> RetrievalConfig:
    """The `[retrieval]` table with ``overrides`` (None values ignored), validated with a readable error."""
    return section_config(settings, "retrieval", RetrievalConfig, **overrides)
