"""Each package's public API is explicit: a sorted ``__all__`` whose names all exist."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import turnlog
engine, journal, replay = (importlib.import_module(f"turnlog.{name}") for name in ("engine", "journal", "replay"))

MODULES = sorted({
    info.name
    for package in (engine, journal, replay, turnlog)
    for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")
    if not info.name.rsplit(".", 1)[-1].startswith("_") and not info.name.endswith("__main__")
} | {"turnlog.engine", "turnlog.journal", "turnlog.replay", "turnlog"})


def _isort(name: str) -> tuple[int, str]:
    """isort-style order (ruff's RUF022): CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


@pytest.mark.parametrize("name", MODULES)
def test_public_modules_export_a_sorted_all_of_names_that_exist(name):
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert sorted(exported, key=_isort) == list(exported), \
        f"{name}.__all__ is not sorted"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names missing attributes: {missing}"
    assert module.__doc__, f"{name} has no module docstring"
