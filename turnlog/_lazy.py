"""Lazy re-exports: a package names what it exports once, and each name is imported on first use.

``import turnlog`` (or ``turnlog.engine``, ``turnlog.journal``, ``turnlog.replay``) then costs
only the package's own ``__init__``; the SDKs, click, sqlite-utils and the rest load when a
name that needs them is first used. A package calls :func:`export` with a table from
module (relative to the package, or absolute) to the names it re-exports from there::

    __all__ = export(__name__, {".loop": ("Loop", "run"), ".tools": ("tool",)})

``__all__`` is built from that table (sorted as ruff's RUF022 sorts: CONSTANTS, Classes,
functions), so each name is written once.

A package may be called as one of its exports (``call``): ``turnlog.replay`` is both the
replay package and, called, the ``replay`` function it exports.

A re-exported name may also be the name of a submodule (``turnlog.replay.diff`` is both
the ``diff`` function and the module that defines it). Python binds a package's attribute
to its submodule whenever that submodule is first imported, so such a name is held by the
package's class, where it always resolves to the re-exported object, as it did when these
packages imported everything eagerly.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, Mapping
from types import ModuleType

__all__ = ["export", "isort_key"]


def isort_key(name: str) -> tuple[int, str]:
    """The order of ``__all__``: CONSTANTS, then Classes, then functions (ruff's RUF022)."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def export(package: str, table: Mapping[str, Iterable[str]], *, call: str | None = None,
           submodules: Iterable[str] = ()) -> list[str]:
    """Make ``package`` (a module in ``sys.modules``) re-export ``table``'s names on first use.

    Returns the package's ``__all__``. A name listed twice is a programming error.
    ``call`` names an export that calling the package runs (``turnlog.replay(journal, id)``
    is ``turnlog.replay.replay(journal, id)``). ``submodules`` are exported names that stay
    bound to the submodule of that name (which must then be callable as the export), so
    ``import turnlog.replay.proxy.app as app`` works.
    """
    module = sys.modules[package]
    where: dict[str, str] = {}
    for source, names in table.items():
        for name in names:
            if name in where:
                raise ValueError(f"{package}: {name!r} is exported from {where[name]} and {source}")
            where[name] = source

    def resolve(name: str) -> object:
        return getattr(importlib.import_module(where[name], package), name)

    own = (set(where) & _submodules(module)) - set(submodules)
    namespace: dict[str, object] = {
        "__getattr__": _getattr(package, where, resolve),
        "__dir__": lambda self: sorted(set(self.__dict__) | set(where)),
    }
    for name in own:
        namespace[name] = _Shadowing(name, resolve)
    if call is not None:
        def __call__(self: ModuleType, *args: object, **kwargs: object) -> object:
            return resolve(call)(*args, **kwargs)  # type: ignore[operator]

        __call__.__doc__ = f"Call ``{package}.{call}``."
        namespace["__call__"] = __call__
    module.__class__ = type(f"{package}.<exports>", (ModuleType,), namespace)
    return sorted(where, key=isort_key)


def _submodules(module: ModuleType) -> set[str]:
    """The names of the modules and packages in ``module``'s folder."""
    names: set[str] = set()
    for folder in getattr(module, "__path__", ()):
        for entry in os.listdir(folder):
            stem, dot, suffix = entry.partition(".")
            if not dot or suffix == "py":
                names.add(stem)
    return names


def _getattr(package: str, where: Mapping[str, str], resolve):  # noqa: ANN202
    def __getattr__(self: ModuleType, name: str) -> object:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = resolve(name)
        self.__dict__[name] = value  # the next lookup is a plain attribute
        return value

    return __getattr__


class _Shadowing:
    """A re-exported name that is also a submodule's: reads give the re-exported object,
    and the import system's binding of the submodule is kept aside (not lost)."""

    def __init__(self, name: str, resolve) -> None:  # noqa: ANN001
        self.name = name
        self.resolve = resolve
        self.value: object = None

    def __get__(self, module: ModuleType | None, owner: type) -> object:
        if module is None:
            return self
        if self.value is None:
            self.value = self.resolve(self.name)
        return self.value

    def __set__(self, module: ModuleType, value: object) -> None:
        module.__dict__[f"_{self.name}_module"] = value
