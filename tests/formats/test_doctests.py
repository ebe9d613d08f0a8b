"""The examples in engine.formats' docstrings run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["context", "datamachine", "detect", "exporter", "genai", "importer", "markdown", "otlp",
           "otlp_import"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    module = importlib.import_module(f"turnlog.engine.formats.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
