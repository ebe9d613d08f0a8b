"""The examples in engine.audit's docstrings (and its journal dialects') run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["turnlog.journal._dialect", "display", "prices"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    module = importlib.import_module(name if "." in name else f"turnlog.engine.audit.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
