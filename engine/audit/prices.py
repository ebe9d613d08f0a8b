"""What model calls cost: genai-prices' database, with a user's override table on top.

By default every call is priced from **genai-prices** (Pydantic's maintained
price database, bundled with the package: no network), which knows each
model's prices per token kind (input, cache reads, cache writes of 5 minutes
and 1 hour, output, audio, images), their long-context tiers and their
history. A price table in TOML (``--prices FILE``) adds or overrides entries,
such as negotiated discounts or private models; its entries win::

    currency = "USD"                # the database's currency: overrides must use it too
    per_tokens = 1_000_000          # prices below are per million tokens

    [[prices]]
    provider = "openai"
    model = "gpt-4o"
    since = 2024-08-06              # the day this price took effect (UTC)
    input = 2.50                    # uncached input tokens
    cached_input = 1.25             # input tokens read from the provider's cache
    output = 10.00
    # cache_write = 3.75            # input tokens written to the cache (default: input)
    # cache_write_1h = 6.00         # ... written for one hour (default: cache_write)

A call is priced at the override entry of its provider and model with the
latest ``since`` on or before the day of the call, so old runs keep their
own time's rates. ``model = "*"`` prices every model of a provider that has
no entry of its own. A call neither source prices is *unpriced* (an amount
of ``None`` with a reason), never zero.

>>> table = PriceTable.parse('[[prices]]\\nprovider="p"\\nmodel="m"\\nsince=2025-01-01\\n'
...                          'input=1\\noutput=2', "example")
>>> from turnlog.engine.model.messages import Usage
>>> table.cost("p", "m", "2025-06-01", Usage(input_tokens=1_000_000, output_tokens=500_000))
2.0
>>> table.cost("p", "m", "2024-12-31", Usage(input_tokens=10)) is None
True
>>> Prices(table).charge("p", "m", "2025-06-01", Usage(output_tokens=10)).source
'overrides'
"""

from __future__ import annotations

import bisect
import datetime as dt
import hashlib
import threading
import tomllib
from decimal import Decimal
from functools import cache
from typing import Any

import msgspec

from ..errors import PriceTableError
from turnlog.engine.model.events import Charge, UnpricedReason
from turnlog.engine.model.messages import Usage
from ..providers.registry import by_key, price_key

__all__ = ["DATABASE", "VENDORS", "Price", "PriceTable", "Prices", "add_cost", "database_version",
           "usage_shape", "warm_up"]

#: The price database turnlog prices calls from by default (a Python package).
DATABASE = "genai-prices"

#: How many distinct database charges a ``Prices`` remembers (then it starts again).
_CHARGES_KEPT = 1 << 16

_RATES = ("input", "cached_input", "output", "cache_write", "cache_write_1h")


#: An override table's rate names -> genai-prices' token kinds (prices per million tokens).
_KINDS = {"input": "input_mtok", "cached_input": "cache_read_mtok", "output": "output_mtok",
          "cache_write": "cache_write_mtok", "cache_write_1h": "cache_write_1h_mtok"}



class Price(msgspec.Struct, frozen=True, kw_only=True):
    """One model's rates (per ``per_tokens`` tokens) from the day ``since`` on."""

    provider: str
    model: str
    since: str
    input: float
    output: float
    cached_input: float
    cache_write: float
    cache_write_1h: float


class PriceTable:
    """Prices by provider and model, each a list ordered by the day it took effect."""

    def __init__(self, prices: list[Price], *, currency: str = "USD",
                 per_tokens: int = 1_000_000, source: str = "", digest: str = "") -> None:
        self.currency, self.per_tokens, self.source = currency, per_tokens, source
        #: ``sha256:…`` of the file's text: the version a charge from this table records
        self.digest = digest
        self._by_model: dict[tuple[str, str], list[Price]] = {}
        for price in sorted(prices, key=lambda p: p.since):
            self._by_model.setdefault((price.provider, price.model), []).append(price)
        self._days = {key: [p.since for p in ps] for key, ps in self._by_model.items()}

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
        return cls(prices, currency=currency, per_tokens=per_tokens, source=source,
                   digest="sha256:" + hashlib.sha256(text.encode()).hexdigest())

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
        hour = min(usage.cache_write_1h_tokens, written)
        # Usage.input_tokens counts every prompt token, cached and cache-written ones too.
        fresh = max(usage.input_tokens - cached - written, 0)
        total = (fresh * price.input + cached * price.cached_input
                 + (written - hour) * price.cache_write + hour * price.cache_write_1h
                 + usage.output_tokens * price.output)
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
    rates.setdefault("cache_write_1h", rates["cache_write"])
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


@cache
def database_version() -> str:
    """The installed genai-prices release: the version a charge from the database records."""
    from importlib.metadata import version

    return version(DATABASE)


_warming: list[threading.Thread] = []


def warm_up() -> None:
    """Start loading genai-prices' database in a background thread, once per process.

    A live run calls this when its loop is built, so the load (about a second)
    overlaps the first model call instead of following it.
    """
    if not _warming:
        thread = threading.Thread(target=_snapshot, name="turnlog-prices", daemon=True)
        _warming.append(thread)
        thread.start()


@cache
def _snapshot() -> Any:
    # imported on first use: the database is a large module, and most commands price nothing
    from genai_prices import data_snapshot

    return data_snapshot.get_snapshot()


class Prices:
    """The prices every figure of cost uses: the ``overrides`` table, then genai-prices.

    ``charge`` prices one call; :func:`add_cost` sums. A call neither source
    knows is unpriced, with the reason, never free. The ``scripted`` provider
    runs offline and costs nothing (unless the overrides price it).
    """

    def __init__(self, overrides: PriceTable | None = None, *, database: bool = True) -> None:
        if database and overrides is not None and overrides.currency != "USD":
            raise PriceTableError(
                f"price table {overrides.source}: currency is {overrides.currency!r}, but "
                "overrides must be in USD, the currency of the price database under them")
        self.overrides, self.database = overrides, database
        self.currency = "USD" if database or overrides is None else overrides.currency
        self._found: dict[tuple[str, str], tuple[Any, Any] | str] = {}
        self._charged: dict[tuple[Any, ...], Charge] = {}
        self._prices: dict[int, Any] = {}
        self._linear: dict[tuple[str, str, str], bool] = {}

    @classmethod
    def default(cls) -> Prices:
        """genai-prices alone."""
        return cls()

    @classmethod
    def of(cls, prices: Prices | PriceTable | None) -> Prices:
        """``prices`` as a ``Prices``: ``None`` is the default, a ``PriceTable`` alone is
        the only source (no database under it)."""
        if prices is None:
            return cls.default()
        if isinstance(prices, PriceTable):
            return cls(prices, database=False)
        return prices

    @classmethod
    def load(cls, path: str | None) -> Prices:
        """genai-prices under the override table at ``path`` (``None``: none)."""
        return cls(PriceTable.load(path) if path else None)

    @property
    def source(self) -> str:
        """What prices come from, for a report: ``genai-prices 0.2.3``, or
        ``overrides FILE (sha256:…) over genai-prices 0.2.3``."""
        base = f"{DATABASE} {database_version()}"
        if self.overrides is None:
            return base
        if not self.database:
            return self.overrides.source
        return f"overrides {self.overrides.source} ({self.overrides.digest[:19]}) over {base}"

    def cost(self, provider: str, model: str, day: str, usage: Usage) -> float | None:
        """The amount of :meth:`charge` (``None``: unpriced)."""
        return self.charge(provider, model, day, usage).amount

    def charge(self, provider: str, model: str, when: str, usage: Usage) -> Charge:
        """What ``usage`` of ``provider``/``model`` cost at ``when`` (an ISO day or time, UTC).

        The override table wins where it has a price in effect that day; else
        the database prices it at that moment (its history, tiers and
        off-peak hours apply).
        """
        if self.overrides is not None:
            price = self.overrides.price(provider, model, when[:10])
            if price is not None:
                return Charge(amount=self.overrides.cost(provider, model, when[:10], usage),
                              currency=self.currency, source="overrides", version=self.overrides.digest,
                              priced_as=f"{price.provider}/{price.model}")
        if provider == "scripted":
            return Charge(amount=0.0, source="scripted", priced_as="scripted/*")
        if not self.database:
            assert self.overrides is not None
            return Charge(currency=self.currency, source="overrides", version=self.overrides.digest,
                          reason=f"{provider}/{model} has no price in {self.overrides.source} "
                                 f"on {when[:10]}")
        found = self._find(provider, model)
        if isinstance(found, str):  # a code (the sentence is rendered when read) or a sentence
            return Charge(source=DATABASE, version=database_version(), reason=found)
        vendor, info = found
        counts = _database_counts(usage)
        # The price in effect at that moment (history, off-peak hours), then the usage at it:
        # what ``ModelInfo.calc_price`` does. Its amount depends on nothing else, so each
        # (entry, price, counts) is computed once, however many calls share them.
        moment = _moment(when)
        model_price = info.get_prices(moment)
        key = (vendor.id, info.id, id(model_price), counts)
        charge = self._charged.get(key)
        if charge is None:
            if len(self._charged) >= _CHARGES_KEPT:  # a long-lived loop's prices stay bounded
                self._charged.clear()
            self._prices.setdefault(id(model_price), model_price)  # its id is not reused
            charge = self._charged[key] = _database_charge(vendor, info, moment, counts)
        return charge

    def linear(self, provider: str, model: str, day: str) -> bool:
        """Whether :meth:`charge` of ``provider``/``model`` at any time of ``day`` is linear in
        the token counts: the charge of a sum of usages is the sum of their charges, when each
        usage is *consistent* (its cached, cache-written, audio and image input tokens within
        its input tokens, its audio output within its output) and all have the same counts at
        zero (:func:`usage_shape`).

        True for an override price (its rates apply per token), the ``scripted`` provider and
        an unpriced model (no amount whatever the counts). For genai-prices' entry, only when
        its price is the same all day (no time-of-day condition) and has a rate per token for
        every kind: a tiered price (a rate chosen by the request's input tokens), a price per
        request or the groq whisper models' billed seconds are not linear.
        """
        if self.overrides is not None and self.overrides.price(provider, model, day) is not None:
            return True
        if provider == "scripted" or not self.database:
            return True
        found = self.find(provider, model)
        if isinstance(found, str):
            return True
        key = (found[1].id, found[0].id, day)
        if key not in self._linear:
            self._linear[key] = _linear(*found, _moment(day))
        return self._linear[key]

    def find(self, provider: str, model: str) -> tuple[Any, Any] | str:
        """genai-prices' ``(provider, model)`` entry for a call, or why there is none.

        Tried in turn: the adapter's vendor (``gemini`` is ``google``,
        ``bedrock`` is ``aws``), the
        vendor a ``vendor/model`` name starts with, then any vendor whose model
        matches (an OpenAI-compatible wire to DeepSeek names ``deepseek-chat``).
        """
        found = self._find(provider, model)
        if isinstance(found, str):
            return Charge(source=DATABASE, version=database_version(),
                          reason=found).explained(provider, model) or found
        return found

    def _find(self, provider: str, model: str) -> tuple[Any, Any] | str:
        """:meth:`find`, remembered, with why there is no entry as the charge records it (an
        ``UnpricedReason`` code, or a sentence)."""
        key = (provider, model)
        if key not in self._found:
            self._found[key] = self._lookup(provider, model)
        return self._found[key]

    def _lookup(self, provider: str, model: str) -> tuple[Any, Any] | str:
        if not model:
            return "the call names no model"
        tries = [(price_key(provider), model)]  # the wire's PRICE_KEY: gemini is google
        head, _, tail = model.partition("/")
        if tail:
            tries.append((head, tail))
        tries.append((None, model))
        snapshot = _snapshot()
        for vendor_id, ref in tries:
            try:
                return snapshot.find_provider_model(ref, None, vendor_id, None)
            except LookupError:
                continue
        return (UnpricedReason.UNLISTED if self.overrides is None
                else UnpricedReason.UNLISTED_OVERRIDES).value

    def rates(self, model: str | None = None, provider: str | None = None,
              when: str | None = None) -> list[dict[str, Any]]:
        """What would be charged per token kind, per million tokens (``turnlog prices``).

        One row per model: ``provider``, ``model``, ``source``, ``version``,
        ``rates`` (token kind -> price, or ``{"base", "tiers"}`` for tiered
        ones). ``model`` narrows to the entry a call of that model would be
        priced at (from either source); ``when`` is the moment (default now).
        """
        moment = _moment(when) if when else dt.datetime.now(dt.UTC)
        day = moment.date().isoformat()
        rows: list[dict[str, Any]] = []
        if self.overrides is not None:
            for (p, m), _days in sorted(self.overrides._by_model.items()):
                if provider not in (None, p) or (model is not None and m not in (model, "*")):
                    continue
                price = self.overrides.price(p, m, day)
                if price is not None:
                    per = 1_000_000 / self.overrides.per_tokens
                    rows.append({"provider": p, "model": m, "source": "overrides",
                                 "version": self.overrides.digest, "since": price.since,
                                 "rates": {_KINDS[k]: getattr(price, k) * per for k in _RATES}})
            if model is not None and rows:
                return rows[:1]
        if not self.database:
            return rows
        if model is not None:
            found = self.find(provider or "", model)
            entries = [] if isinstance(found, str) else [found]
        else:
            entries = [(v, m) for v in _snapshot().providers
                       if provider in (None, v.id) or v.id == price_key(provider)
                       for m in v.models]
        for vendor, info in entries:
            rows.append({"provider": vendor.id, "model": info.id, "source": DATABASE,
                         "version": database_version(),
                         "rates": _rates(info.get_prices(moment))})
        return rows


def _linear(vendor: Any, info: Any, moment: dt.datetime) -> bool:
    """Whether genai-prices' price of ``vendor``/``info`` on the day of ``moment`` is the
    same all day and a rate per unit of every kind it prices, none per request."""
    from genai_prices.types import ConditionalPrice, TimeOfDateConstraint

    if vendor.id == "groq" and info.id.startswith("whisper"):  # bills at least 10 s a request
        return False
    if isinstance(info.prices, list) and any(
            isinstance(c, ConditionalPrice) and isinstance(c.constraint, TimeOfDateConstraint)
            for c in info.prices):
        return False
    price = info.get_prices(moment)
    values = {k: v for k, v in vars(price).items() if not k.startswith("_") and v is not None}
    return "requests_kcount" not in values and all(isinstance(v, Decimal) for v in values.values())


def usage_shape(counts: dict[str, int]) -> int:
    """Which of the token counts a price reads are not zero, as bits (``Prices.linear``'s
    usages of one shape)."""
    return sum(1 << i for i, k in enumerate(_SHAPED) if counts.get(k, 0) > 0)


#: The token counts of a ``Usage`` whose zero or not a charge reads (the 1-hour cache writes
#: as they count: at most the cache writes).
_SHAPED = ("input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens",
           "cache_write_1h_tokens", "input_audio_tokens", "input_image_tokens",
           "output_audio_tokens")


def _rates(price: Any) -> dict[str, Any]:
    """A genai-prices ``ModelPrice`` as plain numbers: kind -> price (or base and tiers)."""
    out: dict[str, Any] = {}
    for key, value in vars(price).items():
        if key.startswith("_") or value is None:
            continue
        if isinstance(value, Decimal):
            out[key] = float(value)
        else:  # TieredPrices
            out[key] = {"base": float(value.base),
                        "tiers": [{"above": t.start, "price": float(t.price)} for t in value.tiers]}
    return out


def _database_charge(vendor: Any, info: Any, moment: dt.datetime,
                     counts: tuple[tuple[str, int], ...]) -> Charge:
    """genai-prices' charge for ``counts`` (:func:`_database_counts`) of ``vendor``/``info``."""
    from genai_prices import Usage as DatabaseUsage

    try:
        calc = info.calc_price(DatabaseUsage(**dict(counts)), vendor, genai_request_timestamp=moment)
    except (ValueError, ArithmeticError) as exc:
        return Charge(source=DATABASE, version=database_version(),
                      priced_as=f"{vendor.id}/{info.id}",
                      reason=f"{DATABASE} cannot price this usage: {exc}")
    return Charge(amount=float(calc.total_price), source=DATABASE, version=database_version(),
                  priced_as=f"{vendor.id}/{info.id}")


def _database_counts(usage: Usage) -> tuple[tuple[str, int], ...]:
    """The non-zero counts of ``usage`` genai-prices prices, by its names: all it reads."""
    written, hour = usage.cache_write_tokens, min(usage.cache_write_1h_tokens, usage.cache_write_tokens)
    counts = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
              "cache_read_tokens": usage.cached_input_tokens, "cache_write_tokens": written,
              "input_audio_tokens": usage.input_audio_tokens,
              "input_image_tokens": usage.input_image_tokens,
              "output_audio_tokens": usage.output_audio_tokens}
    if hour:
        counts["cache_write_1h_tokens"] = hour
        counts["cache_write_5m_tokens"] = written - hour
    return tuple((k, v) for k, v in counts.items() if v)


def _moment(when: str) -> dt.datetime:
    """An ISO day or time as an aware UTC datetime (a day is its midnight)."""
    try:
        moment = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        raise PriceTableError(f"cannot price a call at {when!r}: not an ISO date or time") from None
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def __getattr__(name: str) -> Any:
    if name == "VENDORS":  # turnlog's provider names -> the vendor they are priced as
        return {k: v for k, v in by_key("PRICE_KEY").items() if k != v}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
