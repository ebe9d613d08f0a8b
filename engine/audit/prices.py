"""Model prices with the date each took effect, for estimating what runs cost.

A price table is a TOML file users edit (turnlog ships ``engine/audit/prices.toml``)::

    currency = "USD"
    per_tokens = 1_000_000          # prices below are per million tokens

    [[prices]]
    provider = "openai"
    model = "gpt-4o"
    since = 2024-08-06              # the day this price took effect (UTC)
    input = 2.50                    # uncached input tokens
    cached_input = 1.25             # input tokens read from the provider's cache
    output = 10.00
    # cache_write = 3.75            # input tokens written to the cache (default: input)

A call is priced at the entry of its provider and model with the latest
``since`` on or before the day of the call, so old runs keep their own time's
rates. ``model = "*"`` prices every model of a provider that has no entry of
its own. A call with no entry in effect is *unpriced* (``None``), never zero.

>>> table = PriceTable.parse('[[prices]]\\nprovider="p"\\nmodel="m"\\nsince=2025-01-01\\n'
...                          'input=1\\noutput=2', "example")
>>> from turnlog.engine.messages import Usage
>>> table.cost("p", "m", "2025-06-01", Usage(input_tokens=1_000_000, output_tokens=500_000))
2.0
>>> table.cost("p", "m", "2024-12-31", Usage(input_tokens=10)) is None
True
"""

from __future__ import annotations

import bisect
import datetime as dt
import tomllib
from importlib import resources
from typing import Any

import msgspec

from ..errors import PriceTableError
from ..messages import Usage
from ..providers.registry import by_key, price_key

__all__ = ["DEFAULT_PRICES", "VENDORS", "Price", "PriceTable", "add_cost"]

#: The price table shipped with turnlog (a resource of the ``engine.audit`` package).
DEFAULT_PRICES = "prices.toml"

_RATES = ("input", "cached_input", "output", "cache_write")



class Price(msgspec.Struct, frozen=True, kw_only=True):
    """One model's rates (per ``per_tokens`` tokens) from the day ``since`` on."""

    provider: str
    model: str
    since: str
    input: float
    output: float
    cached_input: float
    cache_write: float


class PriceTable:
    """Prices by provider and model, each a list ordered by the day it took effect."""

    def __init__(self, prices: list[Price], *, currency: str = "USD",
                 per_tokens: int = 1_000_000, source: str = "") -> None:
        self.currency, self.per_tokens, self.source = currency, per_tokens, source
        self._by_model: dict[tuple[str, str], list[Price]] = {}
        for price in sorted(prices, key=lambda p: p.since):
            self._by_model.setdefault((price.provider, price.model), []).append(price)
        self._days = {key: [p.since for p in ps] for key, ps in self._by_model.items()}

    @classmethod
    def default(cls) -> PriceTable:
        """The table shipped with turnlog."""
        text = resources.files("turnlog.engine.audit").joinpath(DEFAULT_PRICES).read_text("utf-8")
        return cls.parse(text, f"turnlog's default {DEFAULT_PRICES}")

    @classmethod
    def load(cls, path: str) -> PriceTable:
        """Read a price table file; ``PriceTableError`` says what is wrong and where."""
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise PriceTableError(f"cannot read price table {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise PriceTableError(f"price table {path} is not UTF-8 text") from None
        return cls.parse(text, path)

    @classmethod
    def parse(cls, text: str, source: str) -> PriceTable:
        """Parse TOML ``text``; ``source`` names it in error messages."""
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise PriceTableError(f"price table {source} is not valid TOML: {exc}") from None
        currency = doc.get("currency", "USD")
        per_tokens = doc.get("per_tokens", 1_000_000)
        if not isinstance(currency, str) or type(per_tokens) is not int or per_tokens < 1:
            raise PriceTableError(
                f"price table {source}: currency must be a string and per_tokens an int >= 1")
        entries = doc.get("prices")
        if not isinstance(entries, list):
            raise PriceTableError(f"price table {source} has no [[prices]] entries")
        prices = [_price(entry, f"price table {source}, [[prices]] entry {i + 1}")
                  for i, entry in enumerate(entries)]
        seen: set[tuple[str, str, str]] = set()
        for p in prices:
            if (p.provider, p.model, p.since) in seen:
                raise PriceTableError(f"price table {source}: two prices for {p.provider}/{p.model} "
                                      f"since {p.since}")
            seen.add((p.provider, p.model, p.since))
        return cls(prices, currency=currency, per_tokens=per_tokens, source=source)

    def price(self, provider: str, model: str, day: str) -> Price | None:
        """The price in effect for ``provider``/``model`` on ``day`` (``YYYY-MM-DD``), if any.

        An adapter of another API of the same vendor is priced as the vendor
        (its wire's ``PRICE_KEY``: ``openai-responses`` at ``openai``'s prices) unless
        the table names it itself.
        """
        vendor = price_key(provider)
        for key in ((provider, model), (provider, "*"), (vendor, model), (vendor, "*")):
            days = self._days.get(key)
            if days:
                i = bisect.bisect_right(days, day)
                if i:
                    return self._by_model[key][i - 1]
                return None  # the model is known but had no price yet that day
        return None

    def cost(self, provider: str, model: str, day: str, usage: Usage) -> float | None:
        """The cost of ``usage`` on ``day``, or ``None`` when no price was in effect."""
        price = self.price(provider, model, day)
        if price is None:
            return None
        cached, written = usage.cached_input_tokens, usage.cache_write_tokens
        # Usage.input_tokens counts every prompt token, cached and cache-written ones too.
        fresh = max(usage.input_tokens - cached - written, 0)
        total = (fresh * price.input + cached * price.cached_input
                 + written * price.cache_write + usage.output_tokens * price.output)
        return total / self.per_tokens


def _price(entry: Any, where: str) -> Price:
    if not isinstance(entry, dict):
        raise PriceTableError(f"{where}: must be a table")
    unknown = set(entry) - {"provider", "model", "since", *_RATES}
    if unknown:
        raise PriceTableError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    for key in ("provider", "model"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise PriceTableError(f"{where}: {key} must be a non-empty string")
    since = _day(entry.get("since"), where)
    rates: dict[str, float] = {}
    for key in ("input", "output"):
        if key not in entry:
            raise PriceTableError(f"{where}: {key} (price per token kind) is missing")
    for key in _RATES:
        if key in entry:
            value = entry[key]
            if type(value) not in (int, float) or value < 0:
                raise PriceTableError(f"{where}: {key} must be a number >= 0, got {value!r}")
            rates[key] = float(value)
    # Without a cached or cache-write rate, such tokens cost what plain input costs.
    rates.setdefault("cached_input", rates["input"])
    rates.setdefault("cache_write", rates["input"])
    return Price(provider=entry["provider"], model=entry["model"], since=since, **rates)


def _day(value: Any, where: str) -> str:
    if isinstance(value, dt.datetime):
        value = value.date()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value).isoformat()
        except ValueError:
            pass
    raise PriceTableError(f"{where}: since must be a date like 2025-01-31, got {value!r}")


def add_cost(total: float | None, cost: float | None) -> float | None:
    """``total + cost``, unknown (``None``) once any part is unpriced: never counted as free.

    The one rule for summing costs (a conversation's, a model's):

    >>> add_cost(add_cost(0.0, 0.5), 0.25), add_cost(0.5, None), add_cost(None, 0.25)
    (0.75, None, None)
    """
    return None if total is None or cost is None else total + cost


def __getattr__(name: str) -> Any:
    if name == "VENDORS":  # provider names -> the vendor whose price entries they share
        return {k: v for k, v in by_key("PRICE_KEY").items() if k != v}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
