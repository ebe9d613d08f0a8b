"""Keeping the API key out of everything a provider returns.

A hostile or careless server may echo the key anywhere: in a JSON field of a
successful answer (stored as ``raw``), in a non-JSON body (quoted by
``MalformedResponseError``), in an error body (the error's message). A
``Redactor`` masks the configured key and its obvious encodings — URL-encoded,
JSON- and repr-escaped, and base64 (standard and URL-safe) wherever the key
sits inside the encoded text, as in ``base64("user:" + key)`` — so a value
that reaches an event, a log line, an exception message or the terminal no
longer holds it::

    >>> r = Redactor("sk-live-0123456789abcdef")
    >>> r.text("echo: sk-live-0123456789abcdef")
    'echo: [redacted key]'
    >>> import base64
    >>> r.text(base64.b64encode(b"user:sk-live-0123456789abcdef").decode())
    'dXNlcjpz[redacted key]ZWY='

(at most the two bytes at either end of the key stay, as the partial base64
groups around the mask.)

``read_body`` parses a response body the same way for every provider: the
text is masked first (so a quoted excerpt never cuts a key in half), then the
parsed data is walked once, masking strings again (escapes such as
``\\u0073k-`` are gone by then) and refusing what the journal cannot hold —
nesting deeper than ``MAX_DEPTH`` and lone surrogates — as a
``MalformedResponseError`` naming where.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import shlex
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import MalformedResponseError
from turnlog.engine.model.nesting import MAX_DEPTH, too_deep

__all__ = ["CREDENTIAL", "MASK", "MAX_DEPTH", "Redactor", "command_secrets", "credential_values",
           "read_body"]

MASK = "[redacted key]"
_MIN_SECRET = 8  # shorter "keys" (test placeholders) would mask ordinary words
#: Names that say their value is a credential: headers, query parameters, command-line
#: flags and environment variables, on any wire (matched lower-case).
CREDENTIAL = re.compile(r"auth|api[-_]?key|^key$|token|secret|password|credential|cookie"
                        r"|signature|^sig$")
#: A header given as one command-line word (``Authorization: Bearer KEY``, curl's ``-H``).
_HEADER = re.compile(r"([A-Za-z0-9_-]+):[ \t]*(\S.*)", re.DOTALL)
_KEYLIKE = re.compile(r"\b(?:sk-|sk_|AIza|xai-|gsk_)[A-Za-z0-9_*\-]{3,}")


def _base64_cores(raw: bytes) -> set[str]:
    """The base64 text of ``raw`` that appears whatever precedes it, at each of 3 alignments."""
    cores = set()
    for skip in range(3):
        body = raw[skip:]
        body = body[:len(body) - len(body) % 3]
        if len(body) >= 6:
            encoded = base64.b64encode(body).decode()
            cores |= {encoded, encoded.replace("+", "-").replace("/", "_")}
    return cores


def _variants(secret: str) -> list[str]:
    raw = secret.encode()
    found = {
        secret,
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        json.dumps(secret)[1:-1].replace("/", "\\/"),
        repr(secret)[1:-1],
        *_base64_cores(raw),
    }
    lower = re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), urllib.parse.quote(secret, safe=""))
    found.add(lower)
    return sorted((v for v in found if len(v) >= _MIN_SECRET), key=len, reverse=True)


def credential_values(value: str) -> list[str]:
    """The secrets in one credential value: itself, its token after any scheme word
    (``Bearer``, ``bearer``, ``Basic``, ``Token`` ...), and a Basic token's decoded parts."""
    value = value.strip()
    out = [value]
    scheme, _, token = value.partition(" ")
    token = token.strip()
    if token:
        out.append(token)
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(token, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                pair = ""
            out += [pair, *pair.split(":", 1)] if pair else []
    return out


def _url_secrets(word: str) -> list[str]:
    """A URL's password and the values of its query parameters named as credentials."""
    try:
        parts = urllib.parse.urlsplit(word)
        password = parts.password
    except ValueError:
        return []
    found = [password] if password else []
    for name, value in urllib.parse.parse_qsl(parts.query):
        if CREDENTIAL.search(name.lower()):
            found += credential_values(value)
    return found


def command_secrets(words: Sequence[str], env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The credentials a command line (or a URL, as one word) carries, for a
    :class:`Redactor`: the value of each flag named as one (``--api-key KEY``,
    ``--token=KEY``), of each ``NAME=VALUE`` word so named (``env GITHUB_TOKEN=KEY cmd``),
    of each header word so named (``--header 'Authorization: Bearer KEY'``), a URL's
    password and credential query values (a word, or a ``--db=URL`` word's value), and
    the values of ``env`` so named.

        >>> command_secrets(["srv", "--api-key", "k1", "--token=k2", "TOKEN=k3", "-v", "x"])
        ('k1', 'k2', 'k3')
    """
    found: list[str] = []
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        flag = name.startswith("-")
        header = _HEADER.match(word)
        if "://" in name:  # a URL (its query may hold '=')
            found += _url_secrets(word)
            continue
        if "://" in value:  # a URL given as a flag's or a variable's value (--db=URL)
            found += _url_secrets(value)
        if CREDENTIAL.search(name.lstrip("-").lower()) and (eq or flag):
            if eq:
                found += credential_values(value)
            elif i + 1 < len(words):
                found += credential_values(words[i + 1])
        elif header is not None and CREDENTIAL.search(header[1].lower()):
            found += credential_values(header[2])  # --header 'Authorization: Bearer KEY'
    for name, value in (env or {}).items():
        if CREDENTIAL.search(name.lower()):
            found += credential_values(value)
    return tuple(dict.fromkeys(v for v in found if v))


class Redactor:
    """Masks secrets (and their encodings) in text and in parsed JSON data.

    ``Redactor(key)`` masks one key; ``Redactor(key, *more)`` every one given
    (a request may carry several credentials: a header, a second header, a
    query parameter); ``None`` and too-short values are ignored::

        >>> Redactor("sk-first-0123456789", None, "other-secret-value").text(
        ...     "sk-first-0123456789 and other-secret-value")
        '[redacted key] and [redacted key]'
    """

    def __init__(self, secret: str | None = None, *more: str | None) -> None:
        self.secret = secret
        self.secrets = tuple(dict.fromkeys(s for s in (secret, *more) if s))
        found = {v for s in self.secrets if len(s) >= _MIN_SECRET for v in _variants(s)}
        # longest first: a key that contains another is masked whole
        variants = sorted(found, key=lambda v: (-len(v), v))
        self._pattern = re.compile("|".join(map(re.escape, variants))) if variants else None

    def text(self, text: str) -> str:
        """``text`` with every form of the secret replaced by ``[redacted key]``."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)

    def command(self, words: Sequence[str]) -> str:
        """A command line as output shows it, shell-quoted: a word that is a secret, or
        ``NAME=secret``, masked whatever the secret's length (a word is not prose: it
        cannot mask an ordinary word by accident); every other word as :meth:`text`
        masks it.

            >>> Redactor("p4ss", "sk-live-0123456789").command(
            ...     ["srv", "--password", "p4ss", "--api-key=sk-live-0123456789"])
            "srv --password '[redacted key]' '--api-key=[redacted key]'"
        """
        shown = []
        for word in words:
            name, eq, value = word.partition("=")
            if word in self.secrets:
                word = MASK
            elif eq and value in self.secrets:
                word = f"{name}={MASK}"
            shown.append(self.text(word))
        return shlex.join(shown)

    def cut(self, text: str, limit: int) -> str:
        """``text``'s first ``limit`` characters as :meth:`message` masks them, with no part of
        a secret left at the cut: a secret that starts before ``limit`` and ends after it is
        kept whole up to its end, then masked (``text`` should run past ``limit`` by the
        longest secret, :attr:`reach`).

            >>> Redactor("sk-first-0123456789").cut("body sk-first-0123456789 more", 8)
            'body [redacted key]'
        """
        end = limit
        if self._pattern is not None:
            for found in self._pattern.finditer(text, max(0, limit - self.reach), limit + self.reach):
                if found.start() < limit < found.end():
                    end = found.end()
                    break
        return self.message(text[:end])

    @property
    def reach(self) -> int:
        """The longest form of any secret masked: how far past a cut :meth:`cut` must see."""
        return max((len(v) for s in self.secrets for v in _variants(s)), default=0)

    def message(self, text: str) -> str:
        """An error text: the secret's forms, and anything shaped like an API key, masked.

        APIs echo keys in error messages, often masked (``sk-ab***yz``);
        masked or not, error texts reach the journal and keys must not.
        """
        return _KEYLIKE.sub(MASK, self.text(text))

    def data(self, value: Any, provider: str) -> Any:
        """``value`` (parsed JSON) with the secret masked in every string, keys included.

        Iterative, so depth costs no stack; raises ``MalformedResponseError``
        for nesting beyond ``MAX_DEPTH`` or a string with a lone surrogate.
        """
        root: list[Any] = [value]
        stack: list[tuple[Any, Any, int, str]] = [(root, 0, 0, "body")]
        while stack:
            parent, slot, depth, where = stack.pop()
            item = parent[slot]
            if isinstance(item, str):
                parent[slot] = self._string(item, where, provider)
            elif isinstance(item, (dict, list)):
                if depth >= MAX_DEPTH:  # the one limit (engine.nesting)
                    raise MalformedResponseError(too_deep(f"response {where}"),
                                                 provider=provider)
                if isinstance(item, dict):
                    clean = {self._string(k, f"{where} (a key)", provider): v
                             for k, v in item.items()}
                    parent[slot] = clean
                    stack.extend((clean, k, depth + 1, f"{where}.{k}") for k in clean)
                else:
                    stack.extend((item, i, depth + 1, f"{where}[{i}]") for i in range(len(item)))
        return root[0]

    def _string(self, text: str, where: str, provider: str) -> str:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MalformedResponseError(
                f"response text at {self.text(where)} holds a lone surrogate "
                f"(U+{ord(text[exc.start]):04X}), which is not Unicode text",
                provider=provider) from None
        return self.text(text)


def _refuse_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; the journal could not store them
    raise ValueError(f"{name} is not a JSON number")


def read_body(text: str, provider: str, redactor: Redactor) -> Any:
    """The JSON value of a response body with the secret masked everywhere in it.

    A body that is not JSON (or nests too deep to parse) is a
    ``MalformedResponseError`` quoting its masked start.
    """
    text = redactor.text(text)
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise MalformedResponseError(too_deep("response body"), provider=provider) from None
    except ValueError:
        raise MalformedResponseError(f"response body is not JSON: {text[:200]!r}",
                                     provider=provider) from None
    return redactor.data(value, provider)
