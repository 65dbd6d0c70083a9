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



# --------------------------------------------------------------------------------------------
# One sample per vendored detect-secrets pattern (realmem/gate/detect_secrets/patterns.json),
# keyed by plugin and the pattern's place among that plugin's patterns.

NEUTRAL = "The staging deploy uses {} for its pushes."
HEX = DIGITS + "abcdef"
LOWNUM = LOWER + DIGITS


def _ds_samples(rng: random.Random) -> dict[tuple[str, int], str]:
    r = lambda n, a=ALNUM: rand(rng, n, a)  # noqa: E731
    return {
        ("ArtifactoryDetector", 0): "AKC" + r(70),
        ("ArtifactoryDetector", 1): "AP" + rng.choice("ABCDEF0123456789") + r(70),
        ("AWSKeyDetector", 0): "A3T" + rng.choice(UPPER) + r(16, UPPER + DIGITS),
        ("AWSKeyDetector", 1): f'aws_secret_key = "{r(40, ALNUM + "/+")}"',
        ("AzureStorageKeyDetector", 0): "AccountKey=" + r(86, ALNUM + "+/") + "==",
        ("BasicAuthDetector", 0): f"https://deploy:{r(20)}@git.{r(6, LOWER)}.net/repo.git",
        ("CloudantDetector", 0): f"cloudant_password = '{r(64, HEX)}'",
        ("CloudantDetector", 1): f"cloudant_password = '{r(24, LOWER)}'",
        ("CloudantDetector", 2): f"https://acct:{r(64, HEX)}@acct.cloudant.com",
        ("CloudantDetector", 3): f"https://acct:{r(24, LOWER)}@acct.cloudant.com",
        ("DiscordBotTokenDetector", 0): rng.choice("MNO") + r(23, URLSAFE) + "." + r(6, URLSAFE) + "." + r(27, URLSAFE),
        ("GitHubTokenDetector", 0): rng.choice(["ghp", "gho", "ghu", "ghs", "ghr"]) + "_" + r(36),
        ("GitLabTokenDetector", 0): rng.choice(["glpat", "gldt", "glft", "glsoat", "glrt"]) + "-" + r(20),
        ("GitLabTokenDetector", 1): "GR1348941" + r(20),
        ("GitLabTokenDetector", 2): "glcbt-" + r(2, HEX) + "_" + r(20),
        ("GitLabTokenDetector", 3): "glimt-" + r(25, LOWNUM),
        ("GitLabTokenDetector", 4): "glptt-" + r(40, HEX),
        ("GitLabTokenDetector", 5): "glagent-" + r(50),
        ("GitLabTokenDetector", 6): "gloas-" + r(64),
        ("IbmCloudIamDetector", 0): f"ibm_cloud_iam_api_key = '{r(44, URLSAFE)}'",
        ("IbmCosHmacDetector", 0): f"ibm_cos_hmac_secret_access_key = '{r(48, HEX)}'",
        ("JwtTokenDetector", 0): jwt(rng),
        ("MailchimpDetector", 0): r(32, LOWNUM) + "-us" + str(rng.randrange(1, 21)),
        ("NpmDetector", 0): "//registry.npmjs.org/:_authToken=npm_" + r(36),
        ("OpenAIDetector", 0): "sk-" + r(20) + "T3BlbkFJ" + r(20),
        ("PrivateKeyDetector", 0): "-----BEGIN DSA " + "PRIVATE KEY-----",
        ("PrivateKeyDetector", 1): "-----BEGIN EC " + "PRIVATE KEY-----",
        ("PrivateKeyDetector", 2): "-----BEGIN OPENSSH " + "PRIVATE KEY-----",
        ("PrivateKeyDetector", 3): "-----BEGIN PGP " + "PRIVATE KEY BLOCK-----",
        ("PrivateKeyDetector", 4): "-----BEGIN " + "PRIVATE KEY-----",
        ("PrivateKeyDetector", 5): "-----BEGIN RSA " + "PRIVATE KEY-----",
        ("PrivateKeyDetector", 6): "---- BEGIN SSH2 ENCRYPTED " + "PRIVATE KEY ----",
        ("PrivateKeyDetector", 7): "PuTTY-User-Key-File-2: ssh-rsa",
        ("PypiTokenDetector", 0): "pypi-AgEIcHlwaS5vcmc" + r(80, URLSAFE),
        ("PypiTokenDetector", 1): "pypi-AgENdGVzdC5weXBpLm9yZw" + r(80, URLSAFE),
        ("SendGridDetector", 0): "SG." + r(22, URLSAFE) + "." + r(43, URLSAFE),
        ("SlackDetector", 0): f"xoxb-{rng.randrange(10**10, 10**11)}-{rng.randrange(10**10, 10**11)}-{r(24)}",
        ("SlackDetector", 1): f"https://hooks.slack.com/services/T{r(8, UPPER + DIGITS)}/B{r(8, UPPER + DIGITS)}/{r(24)}",
        ("SoftlayerDetector", 0): f"softlayer_api_key = '{r(64, LOWNUM)}'",
        ("SoftlayerDetector", 1): f"https://api.softlayer.com/soap/v3.1/{r(64, LOWNUM)}",
        ("SquareOAuthDetector", 0): "sq0csp-" + r(43, URLSAFE),
        ("StripeDetector", 0): rng.choice("rs") + "k_live_" + r(24),
        ("TelegramBotTokenDetector", 0): str(rng.randrange(10**8, 10**10)) + ":" + r(35, URLSAFE),
        ("TwilioKeyDetector", 0): "AC" + r(32, LOWNUM),
        ("TwilioKeyDetector", 1): "SK" + r(32, LOWNUM),
    }


def detect_secrets_corpus(patterns: list[dict[str, str]], seed: int = 1500) -> list[tuple[str, str, str]]:
    """(plugin, text, sample) for every vendored pattern, the sample put in NEUTRAL; a pattern
    with no generator here raises KeyError, so an update that adds one fails loudly."""
    rng = random.Random(seed)
    samples = _ds_samples(rng)
    seen: dict[str, int] = {}
    out = []
    for p in patterns:
        k = seen[p["plugin"]] = seen.get(p["plugin"], -1) + 1
        sample = samples[(p["plugin"], k)]
        out.append((p["plugin"], NEUTRAL.format(sample), sample))
    return out
