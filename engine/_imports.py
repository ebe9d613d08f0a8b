"""Import a user's ``MODULE:ATTR`` as ``python -m`` would: the current directory first.

A console script's ``sys.path`` starts with its own directory, not the user's, so
``--tools mytools:TOOLS`` could not import ``mytools.py`` from where the user stands.
The current directory is put first for that import only.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

__all__ = ["import_object"]


def import_object(module: str, attr: str) -> Any:
    """``getattr(import_module(module), attr)``, the current directory on the path meanwhile.

    Raises what the import raises (``ImportError``, ``AttributeError``, ``ValueError``).
    """
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        return getattr(importlib.import_module(module), attr)
    finally:
        if added:
            try:
                sys.path.remove(cwd)
            except ValueError:  # the module removed it itself
                pass
