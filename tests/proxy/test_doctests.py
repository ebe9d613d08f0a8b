"""The examples in the proxy modules' docstrings run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["sse", "streams", "threads", "wires"])
def test_docstring_examples_hold(name):
    module = importlib.import_module(f"turnlog.replay.proxy.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_the_translation_examples_hold():
    module = importlib.import_module("turnlog.replay.proxy.translate")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
