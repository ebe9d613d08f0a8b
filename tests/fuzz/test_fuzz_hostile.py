"""The seeded fuzz of import and response parsing: 100,000 hostile inputs, only typed errors."""

from __future__ import annotations

from tests.fuzz.hostile import fuzz

INPUTS = 100_000
SEED = 20261123


def test_a_hundred_thousand_hostile_inputs_raise_only_turnlog_errors(capsys):
    count, seconds, findings = fuzz(INPUTS, SEED)
    with capsys.disabled():
        print(f"\nfuzz: {count} inputs (import of every format, parse_body + map_response of "
              f"every adapter), seed {SEED}, {seconds:.1f} s, {len(findings)} untyped")
    assert count == INPUTS
    assert not findings, findings[:3]
