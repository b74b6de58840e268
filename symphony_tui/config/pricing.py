"""Prices of models, to turn token counts into money (docs/configuration.md "pricing").

``pricing`` in the front matter maps a model name to its prices in US dollars per million
tokens::

    pricing:
      gpt-5.1-codex: {input: 1.25, cached_input: 0.125, output: 10}

``cached_input`` defaults to ``input`` and ``reasoning`` to ``output``; ``currency`` may be
written and must be ``USD``. The entries are laid over a shipped default table
(``pricing_default.json`` beside this module, read the first time a price is asked for),
which lists the OpenAI models codex uses at the prices published on its ``as_of`` date: a
default to override, not a bill.

A model is looked up by its name as the backend reports it, then by the part after the last
``/`` (``openai/gpt-5.1`` is priced as ``gpt-5.1``), case-insensitively. A model in neither
table has no price: its cost is unknown, never zero.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from symphony_tui.domain import TokenUsage

#: The shipped table, a package data file.
DEFAULT_TABLE_FILE = "pricing_default.json"
PER_TOKENS = 1_000_000
#: The highest price taken, US dollars per million tokens (a dollar a token): far above any
#: model's, and low enough that a run's cost stays a finite number.
MAX_PRICE = 1_000_000


class ModelPrice(BaseModel):
    """One model's prices, US dollars per million tokens (each from 0 to ``MAX_PRICE``).

    ``cached_input`` prices the cached part of the input (default: ``input``);
    ``reasoning`` the reasoning part of the output (default: ``output``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, le=MAX_PRICE, allow_inf_nan=False)
    output: float = Field(ge=0, le=MAX_PRICE, allow_inf_nan=False)
    cached_input: float | None = Field(default=None, ge=0, le=MAX_PRICE, allow_inf_nan=False)
    reasoning: float | None = Field(default=None, ge=0, le=MAX_PRICE, allow_inf_nan=False)
    currency: Literal["USD"] = "USD"

    @field_validator("input", "output", "cached_input", "reasoning", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be a price (a number), not true/false")
        return value

    @model_validator(mode="after")
    def _fill(self) -> ModelPrice:
        if self.cached_input is None:
            object.__setattr__(self, "cached_input", self.input)
        if self.reasoning is None:
            object.__setattr__(self, "reasoning", self.output)
        return self

    def cost(self, t: TokenUsage) -> float:
        """US dollars for ``t``: cached input and reasoning are parts of input and output
        (``TokenUsage``), each priced at its own rate, the rest at the plain rate."""
        cached = min(t.cached_input_tokens, t.input_tokens)
        reasoning = min(t.reasoning_tokens, t.output_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        reasoning_rate = self.output if self.reasoning is None else self.reasoning
        dollars = (
            (t.input_tokens - cached) * self.input
            + cached * cached_rate
            + (t.output_tokens - reasoning) * self.output
            + reasoning * reasoning_rate
        ) / PER_TOKENS
        return dollars if math.isfinite(dollars) else 0.0


@dataclass(frozen=True)
class DefaultTable:
    """The shipped table: its date (ISO ``YYYY-MM-DD``), where its figures come from, and
    lowercased model name -> price."""

    as_of: str
    source: str
    models: Mapping[str, ModelPrice]


@cache
def default_table() -> DefaultTable:
    """The shipped default table, read and validated once. Raises ``ValueError`` when the
    package's data file is damaged (a packaging fault, not the operator's)."""
    text = resources.files("symphony_tui.config").joinpath(DEFAULT_TABLE_FILE).read_text("utf-8")
    data = json.loads(text)
    models = {str(k).lower(): ModelPrice.model_validate(v) for k, v in data["models"].items()}
    return DefaultTable(str(data["as_of"]), str(data.get("source", "")), models)


def model_keys(value: Any) -> Any:
    """The ``pricing`` setting as written with its model names trimmed and lowercased
    (``None``: no entries); anything else is left for validation to report. Raises
    ``ValueError`` for an empty name and for two names that differ only in case."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        return value
    keys: dict[str, Any] = {}
    written: dict[str, str] = {}
    for name, prices in value.items():
        key = str(name).strip().lower()
        if not key:
            raise ValueError("a model name is empty")
        if key in written:
            raise ValueError(
                f"{written[key]!r} and {str(name)!r} name the same model "
                "(names are matched case-insensitively)"
            )
        keys[key], written[key] = prices, str(name)
    return keys


def lookup(table: Mapping[str, ModelPrice], model: str | None) -> ModelPrice | None:
    """The price of ``model`` in the operator's ``table``, then in the shipped default (by
    the whole name, then by the part after the last ``/``); None when neither has it."""
    if not model:
        return None
    name = model.strip().lower()
    names = (name, name.rsplit("/", 1)[-1]) if "/" in name else (name,)
    for key in names:
        if key in table:
            return table[key]
    defaults = default_table().models
    for key in names:
        if key in defaults:
            return defaults[key]
    return None
