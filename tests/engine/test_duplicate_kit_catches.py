"""Issue 25, 20: the kit catches a rule that breaks a distinction the docs promise, at the docs'
CI profile (``max_examples=25``), whatever the seed: each distinction is a fixed ``@example``.

Each wrong rule below refuses a call when it is "the same" as the previous call under a
comparison that breaks one promise of docs/property-testing.md. The laws are run on each, in a
pytest subprocess under the docs' CI profile, with several seeds; every seed must fail every
wrong rule.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

#: promise broken -> how the wrong rule rewrites a value before comparing
WRONG = {
    "TrueIsOne": "int(v) if isinstance(v, bool) else v",
    "NFKCNotNFC": "unicodedata.normalize('NFKC', v) if isinstance(v, str) else v",
    "NoNFC": "v + '\\x00' + str(unicodedata.is_normalized('NFC', v)) if isinstance(v, str) else v",
    "OneIsNotOnePointZero": "'float:' + repr(v) if isinstance(v, float) else v",
    "MinusZeroIsNotZero": "'minus zero' if isinstance(v, float) and repr(v) == '-0.0' else v",
    "KeyOrderCounts": "[[k, x] for k, x in v.items()] if isinstance(v, dict) else v",
    "ListOrderIgnored": "sorted(v, key=json.dumps) if isinstance(v, list) else v",
}

_HEAD = '''
import json
import unicodedata

from turnlog import DuplicatePolicy, call_key
from turnlog.engine.model.messages import ToolCall
from turnlog.testing import DuplicateRuleLaws


def walk(v, rewrite):
    v = rewrite(v)
    if isinstance(v, dict):
        return {rewrite(k) if isinstance(rewrite(k), str) else k: walk(x, rewrite)
                for k, x in v.items()}
    if isinstance(v, list):
        return [walk(x, rewrite) for x in v]
    return v


def rule(rewrite):
    def wrong(name, arguments, state):
        calls = [p for m in state.message_list if m.role == "assistant" for p in m.parts
                 if type(p) is ToolCall]
        if not calls:
            return False
        last = calls[-1]
        return call_key(last.name, walk(last.arguments, rewrite)) == call_key(
            name, walk(arguments, rewrite))
    return wrong
'''

_CLASS = '''

class Test{name}(DuplicateRuleLaws):
    policy = DuplicatePolicy(rule="custom", custom="wrong")
    predicate = staticmethod(rule(lambda v: {rewrite}))
'''

# the docs' CI profile; shrinking is left out (it only makes a failure smaller, and this test
# asks whether the laws fail at all)
_CONFTEST = '''
from hypothesis import Phase, settings

settings.register_profile("ci", max_examples=25, deadline=None,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate])
settings.load_profile("ci")
'''


def caught(tmp_path, seed: int) -> dict[str, int]:
    """Failed laws per wrong rule, for one seed."""
    (tmp_path / "conftest.py").write_text(_CONFTEST)
    (tmp_path / "test_wrong.py").write_text(
        _HEAD + "".join(_CLASS.format(name=n, rewrite=r) for n, r in WRONG.items()))
    report = tmp_path / f"report-{seed}.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    f"--hypothesis-seed={seed}", f"--junitxml={report}", "test_wrong.py"],
                   cwd=tmp_path, capture_output=True, text=True, timeout=900)
    failed = {name: 0 for name in WRONG}
    cases = list(ET.parse(report).iter("testcase"))
    assert len(cases) == 6 * len(WRONG), "every law ran on every wrong rule"
    for case in cases:
        assert case.find("error") is None, case.find("error").get("message")
        if case.find("failure") is not None:
            failed[case.get("classname").rsplit(".Test", 1)[1]] += 1
    return failed


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_every_promised_distinction_is_caught_at_25_examples_whatever_the_seed(tmp_path, seed):
    failed = caught(tmp_path, seed)
    assert [name for name, n in failed.items() if n == 0] == []
