"""The templates' environment: Jinja2 with autoescaping everywhere, and the filters pages share."""

from __future__ import annotations

import base64
import hashlib
import json
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined

from turnlog.engine.audit.display import milliseconds, model_label, money
from turnlog.engine.loop.texts import readable_result

__all__ = ["CSP", "asset", "environment", "href", "money", "script_hash", "when"]

#: The Content-Security-Policy of every page the server sends: nothing inline, nothing remote.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def when(stamp: str | None) -> str:
    """``2026-01-31T12:00:05.123456Z`` as ``2026-01-31 12:00:05``."""
    return (stamp or "")[:19].replace("T", " ")


def href(path: str, **params: Any) -> str:
    """``path?query`` with every value URL-encoded (``None`` values left out)."""
    kept = {k: v for k, v in params.items() if v is not None and v != ""}
    return path + ("?" + urlencode(kept) if kept else "")


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{milliseconds(v)} ms"


def _pretty(text: str) -> str:
    """Tool results that are JSON, indented; anything else as it is."""
    try:
        return json.dumps(json.loads(text), ensure_ascii=False, indent=2)
    except (ValueError, TypeError):
        return text


def environment() -> Environment:
    """The Jinja2 environment over ``replay/view/templates`` (autoescape on for every template)."""
    env = Environment(loader=PackageLoader("turnlog.replay.view", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(money=money, when=when, ms=_ms, pretty=_pretty, result=readable_result,
                       num=lambda v: "-" if v is None else f"{v:,}")
    env.globals.update(href=href, model_label=model_label)
    return env


def asset(name: str) -> str:
    """The text of a static asset shipped in ``replay/view/static``."""
    return resources.files("turnlog.replay.view").joinpath("static", name).read_text("utf-8")


def script_hash(text: str) -> str:
    """The CSP source (``'sha256-…'``) that allows exactly this inline script or style."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"
