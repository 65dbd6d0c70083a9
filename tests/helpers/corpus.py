"""Fake secrets made at test time from the tests/corpus templates: every ``<<X:n>>``, ``<<JWT>>``,
``<<PEM>>``, ``<<BASIC>>`` and ``<<HOST>>`` marker becomes fresh random material, so no realistic
credential is ever committed."""

from __future__ import annotations

import base64
import json
import random
import re
import string
from pathlib import Path

CORPUS = Path(__file__).parents[1] / "corpus"

UPPER, LOWER, DIGITS = string.ascii_uppercase, string.ascii_lowercase, string.digits
ALNUM = UPPER + LOWER + DIGITS
URLSAFE = ALNUM + "_-"


# --------------------------------------------------------------------------------------------
# Generators

def rand(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    """n random characters that always include an uppercase, a lowercase and a digit when the
    alphabet offers them (so generated keys never degenerate into words or numbers)."""
    chars = [rng.choice(alphabet) for _ in range(n)]
    required = [pool for pool in (UPPER, LOWER, DIGITS) if set(pool) & set(alphabet)]
    for slot, pool in zip(rng.sample(range(n), len(required)), required):
        chars[slot] = rng.choice([c for c in pool if c in alphabet])
    return "".join(chars)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def private_key_block(rng: random.Random) -> str:
    label = rng.choice(["RSA ", "EC ", "OPENSSH ", "DSA ", "ENCRYPTED ", ""])
    header = "-----BEGIN " + label + "PRIVATE" + " KEY-----"
    footer = "-----END " + label + "PRIVATE" + " KEY-----"
    body = "\n".join(rand(rng, 64, ALNUM + "+/") for _ in range(4))
    return f"{header}\n{body}\n{footer}"


def jwt(rng: random.Random) -> str:
    header = b64url(json.dumps({"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}).encode())
    payload = b64url(json.dumps({"sub": rand(rng, 10), "iat": rng.randrange(10**9, 2 * 10**9)}).encode())
    return f"{header}.{payload}.{rand(rng, 43, URLSAFE)}"


ALPHABETS = {
    "A": ALNUM, "H": DIGITS + "abcdef", "X": DIGITS + "abcdefABCDEF", "B": UPPER + "234567",
    "C": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
    "U": UPPER + DIGITS, "L": LOWER, "M": UPPER + LOWER, "D": DIGITS, "W": URLSAFE, "S": ALNUM + "+/",
}
_MARKER_RE = re.compile(r"<<(?:([A-Z]):(\d+)|(JWT|PEM|BASIC|HOST))>>")
_ESCAPE_RE = re.compile(r"\\(n|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})")


def unescape(text: str) -> str:
    """The corpus files' escapes: \\n and \\uXXXX / \\UXXXXXXXX."""
    return _ESCAPE_RE.sub(lambda m: "\n" if m.group(1) == "n" else chr(int(m.group(1)[1:], 16)), text)


def expand(template: str, rng: random.Random) -> tuple[str, tuple[str, ...]]:
    """The template with every marker replaced by fresh random material, and the random parts
    (the bytes that must never be stored)."""
    parts: list[str] = []

    def fill(m: re.Match[str]) -> str:
        if m.group(3) == "HOST":
            return f"https://{rand(rng, 8, LOWER)}.example.net"
        if m.group(3) == "JWT":
            value = jwt(rng)
        elif m.group(3) == "PEM":
            value = private_key_block(rng)
        elif m.group(3) == "BASIC":
            value = base64.b64encode(f"deploy:{rand(rng, 16)}".encode()).decode()
        else:
            value = rand(rng, int(m.group(2)), ALPHABETS[m.group(1)])
        parts.append(value)
        return value

    return _MARKER_RE.sub(fill, unescape(template)), tuple(parts)

