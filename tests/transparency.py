"""An independent verifier of turnlog's proofs, written from the standards, not from turnlog.

- RFC 9162 §2.1.3.2 (verifying an inclusion proof) and §2.1.4.2 (verifying a
  consistency proof), RFC 6962 §2.1 hashing (0x00 leaf, 0x01 node prefixes);
- C2SP signed-note (``golang.org/x/mod/sumdb/note``): verifier key
  ``name+hash+base64(0x01 ‖ key)``, key hash = SHA-256(name ‖ "\\n" ‖ 0x01 ‖ key)[:4],
  signature lines ``— name base64(keyhash ‖ sig)`` after a blank line;
- C2SP tlog-checkpoint: origin, decimal size, base64 root hash.

It imports nothing from turnlog: it stands for a tool that has never met it.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def merkle_root(leaf_data: list[bytes]) -> bytes:
    """MTH(D[n]) straight from RFC 6962 §2.1's recursive definition."""
    if not leaf_data:
        return _sha(b"")
    if len(leaf_data) == 1:
        return _sha(b"\x00" + leaf_data[0])
    k = 1
    while k * 2 < len(leaf_data):
        k *= 2
    return _sha(b"\x01" + merkle_root(leaf_data[:k]) + merkle_root(leaf_data[k:]))


def verify_inclusion(leaf: bytes, index: int, size: int, proof: list[bytes], root: bytes) -> bool:
    """RFC 9162 §2.1.3.2, step by step (``leaf`` is the leaf's data, not its hash)."""
    if index >= size:
        return False
    fn, sn = index, size - 1
    r = _sha(b"\x00" + leaf)
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = _sha(b"\x01" + p + r)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = _sha(b"\x01" + r + p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(first: int, second: int, first_hash: bytes, second_hash: bytes,
                       proof: list[bytes]) -> bool:
    """RFC 9162 §2.1.4.2, step by step."""
    if first > second:
        return False
    if first == second:
        return proof == [] and first_hash == second_hash
    if first == 0:
        return proof == []
    if not proof:
        return False
    if first & (first - 1) == 0:  # an exact power of 2: prepend first_hash
        proof = [first_hash, *proof]
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = _sha(b"\x01" + c + fr)
            sr = _sha(b"\x01" + c + sr)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = _sha(b"\x01" + sr + c)
        fn >>= 1
        sn >>= 1
    return fr == first_hash and sr == second_hash and sn == 0


def open_checkpoint(note: str, vkey: str) -> tuple[str, int, bytes]:
    """Check a checkpoint note's signature by ``vkey``; return origin, size and root.

    Raises ``ValueError`` when anything does not hold.
    """
    name, key_hash_hex, key_b64 = vkey.split("+", 2)
    raw = base64.b64decode(key_b64, validate=True)
    if raw[0] != 1 or len(raw) != 33:
        raise ValueError("not an Ed25519 verifier key")
    key_id = _sha(name.encode() + b"\n" + raw)[:4]
    if key_id.hex() != key_hash_hex:
        raise ValueError("verifier key hash does not match")
    body, sep, sigs = note.rpartition("\n\n")
    if not sep or not note.endswith("\n"):
        raise ValueError("not a signed note")
    text = body + "\n"
    good = False
    for line in sigs.splitlines():
        dash, signer, sig_b64 = line.split(" ")
        if dash != "\u2014":
            raise ValueError("bad signature line")
        sig = base64.b64decode(sig_b64, validate=True)
        if signer == name and sig[:4] == key_id:
            Ed25519PublicKey.from_public_bytes(raw[1:]).verify(sig[4:], text.encode())
            good = True
    if not good:
        raise ValueError("no signature by that key")
    origin, size, root_b64 = text.split("\n")[:3]
    return origin, int(size), base64.b64decode(root_b64, validate=True)
