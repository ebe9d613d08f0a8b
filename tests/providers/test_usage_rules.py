"""Each wire's usage rule: every field it sends lands in the neutral usage, no token twice.

The neutral ``Usage`` counts every prompt token in ``input_tokens`` and every
generated one in ``output_tokens``; cache reads and writes, audio, images and
reasoning are *parts* of those totals. Each wire says it differently:
OpenAI's ``reasoning_tokens`` are inside ``completion_tokens`` and its
``cached_tokens`` inside ``prompt_tokens``; Anthropic's cache tokens are
outside its ``input_tokens``; Gemini's thoughts are outside
``candidatesTokenCount``. The wire's usage object is kept verbatim in ``raw``.
"""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from turnlog.engine.model.messages import Usage
from turnlog.engine.providers import anthropic, gemini, openai, openai_responses
from tests.fakeapi import reply

counts = st.integers(0, 10**7)


def test_anthropic_cache_tokens_are_outside_input_tokens_and_the_1h_writes_are_kept():
    wire = {"input_tokens": 10, "output_tokens": 3, "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 50,
            "cache_creation": {"ephemeral_5m_input_tokens": 20, "ephemeral_1h_input_tokens": 30}}
    usage = anthropic.map_response(reply("anthropic", text="x", usage=wire)).usage
    assert usage == Usage(input_tokens=160, output_tokens=3, cached_input_tokens=100,
                          cache_write_tokens=50, cache_write_1h_tokens=30, raw=wire)


def test_anthropic_writes_reported_only_by_ttl_are_counted():
    wire = {"input_tokens": 1, "output_tokens": 1,
            "cache_creation": {"ephemeral_5m_input_tokens": 4, "ephemeral_1h_input_tokens": 6}}
    usage = anthropic.map_usage(wire)
    assert (usage.input_tokens, usage.cache_write_tokens, usage.cache_write_1h_tokens) == (11, 10, 6)


@given(counts, counts, counts, counts)
def test_anthropic_input_is_the_sum_of_its_three_counts(fresh, read, write, out):
    usage = anthropic.map_usage({"input_tokens": fresh, "cache_read_input_tokens": read,
                                 "cache_creation_input_tokens": write, "output_tokens": out})
    assert usage.input_tokens == fresh + read + write
    assert usage.input_tokens - usage.cached_input_tokens - usage.cache_write_tokens == fresh


def test_openai_reasoning_and_cached_tokens_are_parts_not_additions():
    wire = {"prompt_tokens": 1200, "completion_tokens": 800, "total_tokens": 2000,
            "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 50},
            "completion_tokens_details": {"reasoning_tokens": 600, "audio_tokens": 40,
                                          "accepted_prediction_tokens": 0}}
    usage = openai.map_response(reply("openai", text="x", usage=wire)).usage
    assert usage == Usage(input_tokens=1200, output_tokens=800, cached_input_tokens=1024,
                          reasoning_tokens=600, input_audio_tokens=50, output_audio_tokens=40,
                          raw=wire)
    assert usage.total_tokens == wire["total_tokens"]  # nothing counted twice


def test_deepseek_cache_hits_on_the_openai_wire_are_the_cached_part():
    # DeepSeek's Chat Completions usage: prompt_tokens = hits + misses
    wire = {"prompt_tokens": 1000, "completion_tokens": 10, "prompt_cache_hit_tokens": 700,
            "prompt_cache_miss_tokens": 300}
    usage = openai.map_usage(wire)
    assert (usage.input_tokens, usage.cached_input_tokens, usage.raw) == (1000, 700, wire)


def test_responses_api_reasoning_and_cached_tokens_are_parts():
    wire = {"input_tokens": 500, "output_tokens": 300, "total_tokens": 800,
            "input_tokens_details": {"cached_tokens": 256},
            "output_tokens_details": {"reasoning_tokens": 200}}
    usage = openai_responses.map_usage(wire)
    assert usage == Usage(input_tokens=500, output_tokens=300, cached_input_tokens=256,
                          reasoning_tokens=200, raw=wire)
    assert usage.total_tokens == wire["total_tokens"]


def test_gemini_thoughts_are_added_to_output_and_modalities_are_kept():
    wire = {"promptTokenCount": 1000, "candidatesTokenCount": 10, "thoughtsTokenCount": 20,
            "cachedContentTokenCount": 600, "toolUsePromptTokenCount": 5, "totalTokenCount": 1035,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 700},
                                    {"modality": "AUDIO", "tokenCount": 200},
                                    {"modality": "IMAGE", "tokenCount": 100}]}
    usage = gemini.map_response(reply("gemini", text="x", usage=wire)).usage
    assert usage == Usage(input_tokens=1005, output_tokens=30, cached_input_tokens=600,
                          reasoning_tokens=20, input_audio_tokens=200, input_image_tokens=100,
                          raw=wire)
    assert usage.total_tokens == wire["totalTokenCount"]  # nothing counted twice


def test_usage_sums_every_count_and_drops_the_raw_objects():
    a = Usage(input_tokens=1, cache_write_1h_tokens=2, output_audio_tokens=3, raw={"a": 1})
    b = Usage(input_tokens=10, input_image_tokens=4, raw={"b": 2})
    assert a + b == Usage(input_tokens=11, cache_write_1h_tokens=2, output_audio_tokens=3,
                          input_image_tokens=4)


def test_a_usage_encodes_only_what_it_holds_so_old_events_keep_their_bytes():
    # an event written before the new counts existed decodes to the same usage
    old = b'{"input_tokens":5,"output_tokens":3,"cached_input_tokens":0,"cache_write_tokens":0,' \
          b'"reasoning_tokens":0}'
    assert msgspec.json.decode(old, type=Usage) == Usage(input_tokens=5, output_tokens=3)
    assert msgspec.json.encode(Usage(input_tokens=5)) == b'{"input_tokens":5}'


def test_a_wire_without_usage_maps_to_zero():
    from turnlog.engine.providers import bedrock

    for module in (anthropic, openai, openai_responses, gemini, bedrock):
        assert module.map_usage(None) == Usage()


def test_bedrock_cache_tokens_are_outside_input_tokens():
    from turnlog.engine.providers import bedrock

    wire = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 75,
            "cacheReadInputTokens": 40, "cacheWriteInputTokens": 20}
    usage = bedrock.map_usage(wire)
    assert usage == Usage(input_tokens=70, output_tokens=5, cached_input_tokens=40,
                          cache_write_tokens=20, raw=wire)
    assert usage.total_tokens == wire["totalTokens"]  # nothing counted twice


def test_a_bedrock_call_is_priced_as_aws_in_genai_prices():
    from turnlog.engine.audit.prices import Prices

    charge = Prices.default().charge("bedrock", "us.anthropic.claude-sonnet-4-20250514-v1:0",
                                     "2025-09-01", Usage(input_tokens=1_000_000))
    assert charge.amount == 3.0 and charge.priced_as.startswith("aws/")
