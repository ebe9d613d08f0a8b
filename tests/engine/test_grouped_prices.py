"""The audit prices responses recorded without an amount once per group of like responses
(``engine.audit.costs``): only where genai-prices' price is linear in the tokens
(``Prices.linear``). A group's charge equals the sum of its responses' charges; tiered and
time-of-day prices are detected and priced one by one, so the audit from the projection still
equals the audit from the events."""

from __future__ import annotations

import math
from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.engine.audit import projections
from turnlog.engine.audit.costs import cost_figures
from turnlog.engine.audit.prices import Prices, PriceTable, usage_shape
from turnlog.engine.audit.views import EXTENSIONS, connect_readonly
from turnlog.engine.model.conversation import Conversation
from turnlog.engine.model.events import ConversationStarted, ModelRequested, ModelResponded, UserMessage
from turnlog.engine.model.messages import Text, Usage
from turnlog.journal import Journal
from tests.engine.audit_data import PRICES

MODELS = [("openai", "gpt-4o"), ("anthropic", "claude-sonnet-4-20250514"),
          ("gemini", "gemini-2.5-flash"), ("gemini", "gemini-2.5-pro"),
          ("deepseek", "deepseek-chat"), ("anthropic", "claude-sonnet-4-5"),
          ("acme", "unpriced-1"), ("scripted", "echo")]
GROUPED = ("input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens",
           "cache_write_1h_tokens", "input_audio_tokens", "input_image_tokens",
           "output_audio_tokens")


@st.composite
def consistent_usage(draw) -> dict[str, int]:
    """A usage whose parts are within their totals (what ``Prices.linear`` speaks of)."""
    big = draw(st.sampled_from([2_000, 150_000]))  # 150k: two of them cross a 200k tier
    cached, written, audio, image = (draw(st.integers(0, big // 4)) for _ in range(4))
    output = draw(st.integers(0, 5_000))
    return {"input_tokens": cached + written + audio + image + draw(st.integers(0, big)),
            "output_tokens": output, "cached_input_tokens": cached,
            "cache_write_tokens": written, "cache_write_1h_tokens": draw(st.integers(0, written)),
            "input_audio_tokens": audio, "input_image_tokens": image,
            "output_audio_tokens": draw(st.integers(0, output))}


def summed(usages: list[dict[str, int]]) -> Usage:
    return Usage(**{k: sum(u[k] for u in usages) for k in GROUPED})


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(MODELS), st.dates(min_value=__import__("datetime").date(2024, 1, 1),
                                         max_value=__import__("datetime").date(2026, 6, 30)),
       st.lists(consistent_usage(), min_size=1, max_size=6), st.booleans())
def test_a_groups_charge_is_the_sum_of_its_responses_where_the_price_is_linear(
        model, day, usages, overrides):
    prices = Prices(PriceTable.parse(PRICES, "test prices")) if overrides else Prices.default()
    by_shape: dict[int, list[dict[str, int]]] = defaultdict(list)
    for u in usages:
        by_shape[usage_shape(u)].append(u)
    when = day.isoformat()
    if not prices.linear(*model, when):
        return
    for group in by_shape.values():
        each = [prices.charge(*model, f"{when}T{h % 24:02d}:30:00Z", Usage(**u)).amount
                for h, u in zip(range(0, 60, 5), group)]
        once = prices.charge(*model, when, summed(group)).amount
        if once is None:
            assert all(a is None for a in each)
        else:
            assert None not in each
            assert math.isclose(once, sum(each), rel_tol=1e-12, abs_tol=1e-15)


def test_tiered_and_time_of_day_prices_are_not_linear_and_really_are_not():
    prices = Prices.default()
    assert prices.linear("openai", "gpt-4o", "2025-08-01")
    assert prices.linear("acme", "unpriced-1", "2025-08-01")  # unpriced whatever the counts
    # gemini-2.5-pro: a higher rate for every token of a request over 200k input tokens
    assert not prices.linear("gemini", "gemini-2.5-pro", "2025-08-01")
    one = Usage(input_tokens=150_000, output_tokens=10)
    two = Usage(input_tokens=300_000, output_tokens=20)
    assert prices.cost("gemini", "gemini-2.5-pro", "2025-08-01", two) != \
        2 * prices.cost("gemini", "gemini-2.5-pro", "2025-08-01", one)
    # deepseek-chat: an off-peak price part of the day
    assert not prices.linear("deepseek", "deepseek-chat", "2025-08-01")


def _journal(path) -> None:
    """Uncharged responses a naive grouping would misprice: tiered ones whose sum crosses the
    tier, off-peak ones, inconsistent usages (more cached than input), and linear ones."""
    with Journal(str(path), extensions=EXTENSIONS) as journal:
        for cid, (provider, model) in enumerate(MODELS):
            conv = Conversation.start(journal, ConversationStarted(
                conversation_id=f"c{cid}", provider=provider, model=model),
                recorded_at="2025-08-01T00:00:00.000000Z")
            events, stamps = [UserMessage.of("go")], ["2025-08-01T00:00:01.000000Z"]
            for turn, (hour, usage) in enumerate([
                    (1, Usage(input_tokens=150_000, output_tokens=10)),
                    (12, Usage(input_tokens=150_000, output_tokens=10)),
                    (17, Usage(input_tokens=100, output_tokens=10,  # inconsistent in c0, c1
                               cached_input_tokens=400 if cid < 2 else 40)),
                    (20, Usage(input_tokens=2_000, output_tokens=5, cache_write_tokens=300,
                               cache_write_1h_tokens=900))], start=1):
                events += [ModelRequested(turn=turn, digest="d", provider=provider, model=model),
                           ModelResponded(turn=turn, parts=(Text(text="ok"),), usage=usage),
                           UserMessage.of("more")]
                stamps += [f"2025-08-01T{hour:02d}:00:0{k}.000000Z" for k in range(3)]
            conv.append(*events, recorded_at=stamps)


def test_the_grouped_costs_equal_the_costs_priced_one_by_one(tmp_path):
    path = tmp_path / "j.db"
    _journal(path)
    conn = connect_readonly(str(path))
    try:
        assert projections.in_step(conn)
        prices = Prices.default()
        grouped = cost_figures(conn, prices, 0, projected=True)
        each = cost_figures(conn, prices, 0, projected=False)
    finally:
        conn.close()
    assert grouped == each
    costs = {c["conversation_id"]: c["cost"] for c in grouped["conversations"]}
    assert costs["c3"] is not None and costs["c4"] is not None  # tiered and off-peak priced
    assert costs["c2"] is not None and costs["c5"] is not None
    assert costs["c6"] is None and costs["c7"] == 0.0  # unpriced, scripted
