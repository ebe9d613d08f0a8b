"""Signed notes and Ed25519 keys in the format of ``golang.org/x/mod/sumdb/note``, and
C2SP tlog-checkpoints carried in them.

- Verifier key: ``NAME+HASH+BASE64(0x01 ‖ public key)``; signer key:
  ``PRIVATE+KEY+NAME+HASH+BASE64(0x01 ‖ seed)``. ``HASH`` is 8 hex digits, the first
  4 bytes of ``SHA-256(NAME ‖ "\\n" ‖ 0x01 ‖ public key)`` (0x01: Ed25519).
- A note is UTF-8 text ending in a newline, a blank line, then one line per
  signature: ``— NAME BASE64(key hash ‖ Ed25519 signature of the text)``.
- A checkpoint's text is ``ORIGIN\\nSIZE\\nBASE64(ROOT)\\n`` (C2SP tlog-checkpoint).

Ed25519 comes from the ``cryptography`` package (``pip install -e '.[proof]'``),
imported only when a key is made, used or checked.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from types import ModuleType

import msgspec

from .errors import CheckpointError

__all__ = [
    "Checkpoint",
    "SignerKey",
    "VerifierKey",
    "generate_key",
    "parse_checkpoint",
    "sign_note",
    "signer_key",
    "verifier_key",
    "verify_note",
]

_ED25519 = 1
_SIG_PREFIX = "\u2014 "
_NAME = re.compile(r"[^\s+]+")


def _ed25519() -> ModuleType:  # the module, imported on first use
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise CheckpointError(
            "signing and checking checkpoints needs the cryptography package: "
            "pip install -e '.[proof]' in turnlog's checkout") from None
    return ed25519


def _key_hash(name: str, key: bytes) -> int:
    return int.from_bytes(hashlib.sha256(name.encode() + b"\n" + key).digest()[:4], "big")


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise CheckpointError(f"{what}: {text[:40]!r} is not base64") from None


class VerifierKey(msgspec.Struct, frozen=True):
    """A public key that checks signatures: its ``name``, key ``hash`` and Ed25519 bytes."""

    name: str
    hash: int
    public: bytes

    def text(self) -> str:
        """``NAME+HASH+BASE64``, as ``golang.org/x/mod/sumdb/note`` writes it."""
        key = base64.b64encode(bytes([_ED25519]) + self.public).decode()
        return f"{self.name}+{self.hash:08x}+{key}"

    def verifies(self, text: str, signature: bytes) -> bool:
        """Whether ``signature`` is this key's Ed25519 signature of ``text``."""
        ed = _ed25519()
        try:
            ed.Ed25519PublicKey.from_public_bytes(self.public).verify(signature, text.encode())
        except Exception:  # cryptography's InvalidSignature, or a malformed key
            return False
        return True


class SignerKey(msgspec.Struct, frozen=True):
    """A private key that signs notes: its ``name``, key ``hash`` and Ed25519 seed."""

    name: str
    hash: int
    seed: bytes

    def text(self) -> str:
        """``PRIVATE+KEY+NAME+HASH+BASE64``, as ``golang.org/x/mod/sumdb/note`` writes it."""
        key = base64.b64encode(bytes([_ED25519]) + self.seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.hash:08x}+{key}"

    def verifier(self) -> VerifierKey:
        """The matching verifier key."""
        return VerifierKey(self.name, self.hash, self._public())

    def _public(self) -> bytes:
        ed = _ed25519()
        from cryptography.hazmat.primitives import serialization

        result: bytes = ed.Ed25519PrivateKey.from_private_bytes(self.seed).public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return result

    def sign(self, text: str) -> bytes:
        """The Ed25519 signature of ``text`` (its UTF-8 bytes)."""
        result: bytes = _ed25519().Ed25519PrivateKey.from_private_bytes(self.seed).sign(text.encode())
        return result


def _check_name(name: str, where: str) -> str:
    if not _NAME.fullmatch(name):
        raise CheckpointError(f"{where}: key name {name!r} must be non-empty, without spaces or '+'")
    return name


def generate_key(name: str) -> SignerKey:
    """A new random Ed25519 signer key named ``name``."""
    _check_name(name, "keygen")
    ed = _ed25519()
    from cryptography.hazmat.primitives import serialization

    private = ed.Ed25519PrivateKey.generate()
    seed = private.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                 serialization.NoEncryption())
    public = private.public_key().public_bytes(serialization.Encoding.Raw,
                                               serialization.PublicFormat.Raw)
    return SignerKey(name, _key_hash(name, bytes([_ED25519]) + public), seed)


def _key_parts(text: str, what: str, fields: int) -> list[str]:
    parts = text.strip().split("+", fields - 1)  # base64 may hold '+': the last field takes it
    if len(parts) != fields:
        raise CheckpointError(f"{what}: expected {fields} fields separated by '+', got {len(parts)}")
    return parts


def _key_body(name: str, hash_text: str, b64: str, what: str, size: int) -> tuple[int, bytes]:
    _check_name(name, what)
    if not re.fullmatch(r"[0-9a-f]{8}", hash_text):
        raise CheckpointError(f"{what}: key hash {hash_text!r} is not 8 hex digits")
    raw = _b64(b64, what)
    if len(raw) != 1 + size or raw[0] != _ED25519:
        raise CheckpointError(f"{what}: not an Ed25519 key (algorithm byte 0x01 and {size} bytes)")
    return int(hash_text, 16), raw[1:]


def signer_key(text: str) -> SignerKey:
    """Parse ``PRIVATE+KEY+NAME+HASH+BASE64``; :class:`CheckpointError` if it is not one."""
    what = "signer key"
    parts = _key_parts(text, what, 5)
    if parts[:2] != ["PRIVATE", "KEY"]:
        raise CheckpointError(f"{what}: does not start with PRIVATE+KEY+")
    key_hash, seed = _key_body(parts[2], parts[3], parts[4], what, 32)
    key = SignerKey(parts[2], key_hash, seed)
    if _key_hash(key.name, bytes([_ED25519]) + key._public()) != key_hash:
        raise CheckpointError(f"{what}: its hash {parts[3]} does not match its name and key")
    return key


def verifier_key(text: str) -> VerifierKey:
    """Parse ``NAME+HASH+BASE64``; :class:`CheckpointError` if it is not one."""
    what = "verifier key"
    parts = _key_parts(text, what, 3)
    key_hash, public = _key_body(parts[0], parts[1], parts[2], what, 32)
    if _key_hash(parts[0], bytes([_ED25519]) + public) != key_hash:
        raise CheckpointError(f"{what}: its hash {parts[1]} does not match its name and key")
    return VerifierKey(parts[0], key_hash, public)


def sign_note(text: str, key: SignerKey) -> str:
    """The signature line of ``key`` over a note's ``text`` (which ends in a newline)."""
    sig = key.hash.to_bytes(4, "big") + key.sign(text)
    return f"{_SIG_PREFIX}{key.name} {base64.b64encode(sig).decode()}\n"


def _split_note(note: str) -> tuple[str, list[tuple[str, int, bytes]]]:
    """A note's text and its signatures as ``(name, key hash, signature)``."""
    if not note.endswith("\n"):
        raise CheckpointError("checkpoint: the note does not end with a newline (truncated?)")
    split = note.rfind("\n\n")
    if split < 0:
        raise CheckpointError("checkpoint: no blank line before signatures (unsigned?)")
    text, lines = note[:split + 1], note[split + 2:].splitlines()
    if not lines:
        raise CheckpointError("checkpoint: the note has no signature lines (unsigned)")
    sigs = []
    for number, line in enumerate(lines, 1):
        if not line.startswith(_SIG_PREFIX) or line.count(" ") != 2:
            raise CheckpointError(f"checkpoint: signature line {number} is malformed: {line[:60]!r}")
        name, b64 = line[len(_SIG_PREFIX):].split(" ")
        raw = _b64(b64, f"checkpoint: signature line {number}")
        if not _NAME.fullmatch(name) or len(raw) < 5:
            raise CheckpointError(f"checkpoint: signature line {number} is malformed: {line[:60]!r}")
        sigs.append((name, int.from_bytes(raw[:4], "big"), raw[4:]))
    return text, sigs


def verify_note(note: str, key: VerifierKey) -> str:
    """The text of ``note`` once ``key``'s signature on it is checked.

    :class:`CheckpointError` (``tampered=True``) when it carries no valid signature
    by ``key``; other signers' lines are left unchecked, as the note format says.
    """
    text, sigs = _split_note(note)
    mine = [sig for name, key_hash, sig in sigs if name == key.name and key_hash == key.hash]
    if not mine:
        raise CheckpointError(
            f"checkpoint: not signed by key {key.name}+{key.hash:08x}", tampered=True)
    if not all(key.verifies(text, sig) for sig in mine):
        raise CheckpointError(
            f"checkpoint: the signature by {key.name} does not match the checkpoint's text "
            "(the checkpoint was altered, or signed by another key of that name)", tampered=True)
    return text


class Checkpoint(msgspec.Struct, frozen=True):
    """A parsed tlog-checkpoint: ``origin``, tree ``size``, ``root`` hash, and its ``note``."""

    origin: str
    size: int
    root: bytes
    note: str

    @staticmethod
    def body(origin: str, size: int, root: bytes) -> str:
        """The checkpoint's signed text: ``ORIGIN\\nSIZE\\nBASE64(ROOT)\\n``."""
        return f"{origin}\n{size}\n{base64.b64encode(root).decode()}\n"


def parse_checkpoint(note: str) -> Checkpoint:
    """Read a checkpoint note's text (signatures not checked: see :func:`verify_note`).

    :class:`CheckpointError` for anything that is not a signed checkpoint.
    """
    text, _sigs = _split_note(note)
    lines = text.split("\n")[:-1]
    if len(lines) < 3:
        raise CheckpointError(
            f"checkpoint: expected an origin, a size and a root hash, got {len(lines)} line(s)")
    origin, size, root = lines[:3]
    if not origin or origin != origin.strip():
        raise CheckpointError(f"checkpoint: bad origin line {origin!r}")
    if not (size.isascii() and size.isdigit()) or (size != "0" and size.startswith("0")):
        raise CheckpointError(f"checkpoint: line 2 is not a tree size: {size!r}")
    digest = _b64(root, "checkpoint: line 3 (root hash)")
    if len(digest) != 32:
        raise CheckpointError(f"checkpoint: the root hash has {len(digest)} bytes, not 32")
    return Checkpoint(origin, int(size), digest, note)
