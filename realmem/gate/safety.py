"""Local safety scan for memory candidates (spec: "Remember path", step 1).

A candidate that contains a secret (keys, tokens, private keys, credentialed URLs, literal
password assignments) is refused, or redacted when the caller asks for it.  Token families come
from gitleaks' default rule set, vendored in ``realmem/gate/gitleaks/gitleaks.toml`` and loaded with
gitleaks' semantics, and from detect-secrets' regex plugins (``realmem/gate/detect_secrets/``);
realmem's own rules cover what gitleaks does not (prose, assignments,
URLs, wider shapes).  Public keys, digests and documentation placeholders are not secrets.  A candidate that
contains a prompt-injection pattern (override instructions, forged chat or system tags,
exfiltration, ``curl | sh``, bidi or invisible characters) is always refused.  Refusal
reasons name only the category and kind of each finding, never the matched text.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import re
import re._parser as _sre
import string
import tomllib
import unicodedata
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

import attrs

from realmem.gate import confusables

SECRET = "secret"
INJECTION = "injection"

__all__ = ["INJECTION", "SECRET", "Finding", "ScanResult", "mask_found", "mask_memory", "mask_secrets", "scan",
           "scan_memory", "scan_paths"]


@attrs.frozen
class Finding:
    """One detected pattern: its category, kind and span in the scanned text."""

    category: str  # SECRET or INJECTION
    kind: str
    start: int
    end: int


@attrs.frozen
class ScanResult:
    """Outcome of a scan: ``text`` is the redacted text when redaction applied, else the input."""

    ok: bool
    findings: tuple[Finding, ...]
    text: str

    def kinds(self, category: str) -> tuple[str, ...]:
        """Distinct kinds of one category, in order of first appearance."""
        return tuple(dict.fromkeys(f.kind for f in self.findings if f.category == category))

    def reason(self) -> str:
        """Human message naming the categories and kinds found; never contains matched text."""
        if not self.findings:
            return "ok"
        parts = []
        if secrets := self.kinds(SECRET):
            parts.append(f"a secret ({', '.join(secrets)})")
        if injections := self.kinds(INJECTION):
            parts.append(f"a prompt-injection pattern ({', '.join(injections)})")
        if self.ok:
            return f"redacted: contained {' and '.join(parts)}"
        return f"refused: contains {' and '.join(parts)}"


# --------------------------------------------------------------------------------------------
# Value heuristics

_PLACEHOLDER_WORDS = frozenset(
    """
    password passwd pass pwd passphrase secret secrets token apikey api_key api-key key
    changeme change_me change-me changeit example placeholder redacted masked hidden
    none null nil true false undefined empty todo tbd dummy test testing foo bar foobar
    mypassword yourpassword mysecret yoursecret mytoken yourtoken username user
    """.split()
)
_PLACEHOLDER_RE = re.compile(
    r"""(?ix)
    \$.*                                  # $VAR, ${VAR}, ${{ secrets.X }}, $(cmd)
    | %[A-Za-z_][A-Za-z0-9_]*%            # %VAR%
    | env:[A-Za-z_][A-Za-z0-9_]*          # env:VAR (realmem config convention)
    | <[^<>]*> | \{\{.*\}\} | \{[A-Za-z_][\w.]*\} | %\(?\w*\)?s   # templates, format strings
    | [*xX.•#_-]+                         # masks: ***, xxxx, ...
    | .*\*\*\*.*                          # partially masked
    | (?:your|my|insert|replace)[-_ ].*
    | .*(?:example|placeholder|changeme|change[-_]me|redacted|dummy|_here|-here).*
    """
)
_EXPRESSION_RE = re.compile(r"[(\[{]|^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$|^@")
_VERSION_RE = re.compile(r"v?\d+(?:\.\d+)+(?:[-+][\w.]+)?")
_SYMBOLS = frozenset("!@#$%^&*+=?~|")


def _is_placeholder(value: str) -> bool:
    """True for empty values, env references, templates, masks and well-known dummies."""
    v = value.strip().strip("\"'`")
    return not v or v.lower() in _PLACEHOLDER_WORDS or _PLACEHOLDER_RE.fullmatch(v) is not None


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


def _looks_secret(value: str) -> bool:
    """A single token mixing letters with digits or symbols, or long and high-entropy."""
    if len(value) < 6 or any(ch.isspace() for ch in value) or _VERSION_RE.fullmatch(value):
        return False
    has_alpha = any(ch.isalpha() for ch in value)
    mixed = any(ch.isdigit() for ch in value) or any(ch in _SYMBOLS for ch in value)
    return (has_alpha and mixed) or (len(value) >= 16 and _entropy(value) >= 3.5)


def _jwt_header_ok(token: str) -> bool:
    """The first segment decodes to a JSON object carrying an "alg" member."""
    head = token.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (binascii.Error, ValueError, RecursionError):
        return False
    return isinstance(decoded, dict) and "alg" in decoded


def _literal_flag_value(value: str) -> bool:
    """A password flag's value that is the password itself, not a variable, a prompt or a
    placeholder (``$PASS``, ``"$(cat f)"``, ``<password>``, ``-`` for stdin)."""
    value = value.strip("'\"")
    return bool(value) and value[0] not in "$<{%-" and not _is_placeholder(value)


def _mixed_alnum(token: str) -> bool:
    """Token body contains both a letter and a digit (random keys, not words)."""
    body = token.split("-", 1)[-1]
    return any(c.isdigit() for c in body) and any(c.isalpha() for c in body)


# --------------------------------------------------------------------------------------------
# Secret rules.  Every rule carries a gate: groups of lower-case substrings, at least one of
# each group must occur in the lower-cased text before the (much slower) regex runs.

_Gate = tuple[tuple[str, ...], ...]
_R = TypeVar("_R", "_Rule", "_InjectionRule")


def _gate_open(lower: str, gate: _Gate) -> bool:
    """True when every group of the gate has a member in ``lower``."""
    return not gate or not any(map(_needles_in(lower).isdisjoint, gate))


class _GatedRules(Generic[_R]):
    """Rules and their gates, indexed so the open ones are found from the needles in a text
    (most texts hold a few) rather than by testing every rule's gate."""

    def __init__(self, rules: tuple[_R, ...]) -> None:
        self.rules = rules
        self.by_needle: dict[str, list[int]] = {}  # by the needles of each gate's first group
        for i, rule in enumerate(rules):
            for needle in rule.gate[0] if rule.gate else ():
                self.by_needle.setdefault(needle, []).append(i)
        self.always = tuple(i for i, rule in enumerate(rules) if not rule.gate)

    def open(self, lower: str) -> list[_R]:
        """The rules whose gates are open for ``lower``, in their order."""
        found = _needles_in(lower)
        hits = set(self.always)
        for needle in found:
            hits.update(self.by_needle.get(needle, ()))
        rules = [self.rules[i] for i in sorted(hits)]
        return [r for r in rules if len(r.gate) < 2 or not any(map(found.isdisjoint, r.gate[1:]))]


@functools.lru_cache(maxsize=8)
def _needles_in(lower: str) -> frozenset[str]:
    """Every gate needle and gitleaks keyword that occurs in ``lower``, found in one pass, so
    each rule's gate is then a set lookup instead of its own scan of the text (a scan asks
    some fifty gates about the same text; cached for the scan's texts).

    A needle without whitespace lies inside one whitespace-separated chunk, so the text's
    needles are those of its chunks (memories share most of their words: each chunk's are
    worked out once and kept) plus the few needles with whitespace, looked for in the whole
    text.  A chunk's needles come from one regex, the needles as a trie tried at every
    position: the longest needle starting there, and its prefixes that are needles."""
    finder, prefixes, spanning = _needle_finder()
    found: set[str] = set()
    for chunk in set(lower.split()):
        got = _CHUNK_NEEDLES.get(chunk)
        if got is None:
            got = frozenset().union(*(prefixes[n] for n in set(finder.findall(chunk))))
            if len(chunk) <= _CHUNK_KEPT_CHARS:
                if len(_CHUNK_NEEDLES) >= _CHUNKS_KEPT:
                    _CHUNK_NEEDLES.clear()
                _CHUNK_NEEDLES[chunk] = got
        found |= got
    found.update(n for n in spanning if n in lower)
    return frozenset(found)


# The needles of each chunk seen (a word, a path, a flag), bounded: a few MB at most.
_CHUNK_NEEDLES: dict[str, frozenset[str]] = {}
_CHUNKS_KEPT = 50_000
_CHUNK_KEPT_CHARS = 64  # a longer chunk (a key, a blob) is rarely seen twice


@functools.cache
def _all_needles() -> frozenset[str]:
    needles = set(gitleaks_rules().by_keyword)
    for gate in (*(r.gate for r in _TOKEN_RULES), *(r.gate for r in _INJECTION_RULES), _ASSIGN_GATE, _FLAG_GATE,
                 (_GENERIC_KEYWORDS,), *(r.gate for r in detect_secrets_rules().rules)):
        for group in gate:
            needles.update(group)
    return frozenset(needles)


@functools.cache
def _needle_finder() -> tuple[re.Pattern[str], dict[str, frozenset[str]], tuple[str, ...]]:
    """The trie regex (a zero-width lookahead capturing the longest needle at each position),
    for each needle the needles among its prefixes (itself included), and the needles that
    hold whitespace (``str.split``'s), which no chunk can."""
    needles = _all_needles()
    trie: dict[str, Any] = {}
    for n in needles:
        node = trie
        for ch in n:
            node = node.setdefault(ch, {})
        node[""] = {}  # a needle ends here

    def alternatives(node: dict[str, Any]) -> str:
        branches = [re.escape(ch) + alternatives(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body  # greedy: the longest needle first

    prefixes = {n: frozenset(n[:k] for k in range(1, len(n) + 1) if n[:k] in needles) for n in needles}
    spanning = tuple(sorted(n for n in needles if n.split() != [n]))
    return re.compile(f"(?=({alternatives(trie)}))"), prefixes, spanning


@attrs.frozen
class _Rule:
    kind: str
    regex: re.Pattern[str]
    gate: _Gate
    priority: int = 2  # lower wins when secret spans overlap; gitleaks' own ids use 1
    check: Callable[[re.Match[str]], bool] | None = None
    group: str | int = 0


_GENERIC_PRIORITY = 5  # keyword + entropy rules: any specific kind over the same span wins

# realmem's own token rules: only those wider than the vendored gitleaks rule for the same
# family (AWS ids with any digit, Slack tokens of any shape, Anthropic/OpenAI-compatible ``sk-``
# keys without gitleaks' fixed lengths or markers, keys followed by any punctuation, JWTs
# checked by their decoded header, private keys cut before their END line) or that gitleaks
# lacks (AWS and Azure secret assignments, Authorization headers, bearer tokens).
_PRIVATE_KEY = "PRIVATE KEY(?: BLOCK)?-----"
_TOKEN_RULES: tuple[_Rule, ...] = (
    _Rule("private-key", re.compile(
        r"-----BEGIN[ A-Z0-9]{0,40}" + _PRIVATE_KEY
        + r"(?:[\s\S]*?-----END[ A-Z0-9]{0,40}" + _PRIVATE_KEY + r"|[A-Za-z0-9+/=\s:,.-]*)"),
        (("private key",),), priority=0),
    # A password given on a registry login's command line: ``docker login -u me -p PASSWORD``.
    _Rule("cli-password", re.compile(
        r"(?i)\b(?:docker|podman|nerdctl|buildah|skopeo|helm(?:\s+registry)?|oras|crane)\s+login\b[^\n|;&]{0,200}?"
        r"\s(?:-p|--password)(?:\s+|=)(?P<secret>[^\s'\"`]{4,}|'[^'\n]{4,}'|\"[^\"\n]{4,}\")"),
          (("login",), ("-p", "--password")), check=lambda m: _literal_flag_value(m.group("secret")), group="secret"),
    # An auth token written beside the account it belongs to (Twilio's is 32 hex characters).
    _Rule("auth-token", re.compile(r"(?i)\bauth[ _-]?token\b[^\n]{0,20}?(?<![0-9a-f])(?P<secret>[0-9a-f]{32})(?![0-9a-f])"),
          (("auth",), ("token",)), group="secret"),
    _Rule("aws-access-key", re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
          (("akia", "asia", "abia", "acca"),)),
    _Rule("slack-token", re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}"), (("xox",),)),
    _Rule("anthropic-key", re.compile(r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,}"), (("sk-ant-",),)),
    _Rule("openai-key", re.compile(
        r"(?<![A-Za-z0-9_-])sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
        (("sk-",),), check=lambda m: _mixed_alnum(m.group())),
    _Rule("google-api-key", re.compile(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
          (("aiza",),)),
    # gitleaks' vault rule allows ``s\.[A-Za-z]{24}`` anywhere in the secret (meant for old
    # ``s.`` tokens), so an ``hvs.`` token whose first 24 characters are letters passed it.
    _Rule("vault-service-token", re.compile(r"(?<![\w.-])hvs\.[\w-]{90,120}(?![\w-])"), (("hvs.",),)),
    _Rule("npm-token", re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), (("npm_",),)),
    _Rule("huggingface-token", re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{34,}(?![A-Za-z0-9])"),
          (("hf_",),)),
    _Rule("jwt", re.compile(
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*"),
        (("eyj",),), check=lambda m: _jwt_header_ok(m.group())),
    _Rule("aws-secret-key", re.compile(
        r"(?i)aws[\w.:\s-]{0,20}?(?:secret|sk)[A-Za-z0-9_.-]{0,20}[\"']?[ \t]*(?::=|=>|[:=])"
        r"[ \t]*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"),
        (("aws",),), priority=2, group="v"),
    _Rule("azure-storage-key", re.compile(r"(?i)AccountKey=(?P<v>[A-Za-z0-9+/]{80,}={0,2})"),
          (("accountkey=",),), priority=2, group="v"),
    _Rule("authorization-header", re.compile(
        r"(?i)\bauthorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:bearer|basic|token)[ \t]+"
        r"(?P<v>[A-Za-z0-9._~+/=-]{8,})"),
        (("authorization",),), priority=3, check=lambda m: not _is_placeholder(m.group("v")), group="v"),
    _Rule("pgpass-entry", re.compile(  # host:port:database:user:password (~/.pgpass)
        r"(?m)^[ \t]*[\w.*-]+:(?:\d{2,5}|\*):[\w.*-]+:[\w.*@-]+:(?P<v>\S{6,128})[ \t]*$"),
        ((":",),), priority=3, group="v",
        check=lambda m: not _is_placeholder(m.group("v")) and _looks_secret(m.group("v"))),
    _Rule("bearer-token", re.compile(r"(?i)\bbearer[ \t]+(?P<v>[A-Za-z0-9._~+/-]{16,}=*)"),
          (("bearer",),), priority=3, check=lambda m: _looks_secret(m.group("v")), group="v"),
)

_TOKEN_GATES = _GatedRules(_TOKEN_RULES)

_SCHEME_RE = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,20}$")
_USERINFO_RE = re.compile(r"(?P<u>[^\s:/?#@\[\]\"'<>]*):(?P<v>[^\s/?#@\"']+)@(?=[\w\[])")


def _credentialed_urls(text: str) -> Iterator[tuple[str, int, int, int]]:
    """Passwords in ``scheme://user:password@host`` (not placeholders, not user == password)."""
    pos = text.find("://")
    while pos >= 0:
        m = _USERINFO_RE.match(text, pos + 3)
        if m and _SCHEME_RE.search(text, max(0, pos - 21), pos):
            user, password = m.group("u"), m.group("v")
            if not _is_placeholder(password) and password != user:
                yield "credentialed-url", m.start("v"), m.end("v"), 3
        pos = text.find("://", pos + 3)


# Runs on the lower-cased text; the value is then read from the original text.
_ASSIGN_KEY_RE = re.compile(
    r"(?P<key>pass(?:word|wd|phrase)?|pwd|secret|token|key|credentials?)(?![a-z0-9_])"
    r"[\"']?(?P<sp1>[ \t]*)(?P<sep>:=|=>|[:=]|(?<=[ \t])(?:is|was|to)(?=[ \t]))(?P<sp2>[ \t]*)"
)  # the prose separators cover "the password is ...", "set the token to ..."
_KEY_NAME_RE = re.compile(
    r"(?:api|access|private|auth|secret|signing|encryption|master|client|app)[ _-]?key$")
_VALUE_RE = re.compile(r"""(?P<q>["'`])(?P<qv>[^"'`\r\n]{1,256})(?P=q)|(?P<uv>[^\s"'`,;)\]}]{1,256})""")
_FLAG_RE = re.compile(  # lower-cased text as well
    r"(?<![\w-])--?(?P<key>password|passwd|pass|token|secret|api-key|apikey|auth-token|access-token"
    r"|client-secret)(?:=|[ \t]+)"
)
_FLAG_VALUE_RE = re.compile(r"""(?P<q>["'])(?P<qv>[^"'\r\n]{1,256})(?P=q)|(?P<uv>[^\s"'`;|&]{1,256})""")
_ASSIGN_GATE: _Gate = (("pass", "pwd", "secret", "token", "key", "credential"),)
_FLAG_GATE: _Gate = (("-pass", "-token", "-secret", "-api", "-auth", "-access", "-client"),)


def _assignment_findings(text: str, lower: str) -> Iterator[tuple[str, int, int, int]]:
    """Literal values assigned to password/secret/token/api-key names or flags."""
    if _gate_open(lower, _ASSIGN_GATE):
        for m in _ASSIGN_KEY_RE.finditer(lower):
            key, start = m.group("key"), m.start()
            if key in ("pass", "pwd") and start and lower[start - 1].isalpha():
                continue  # bypass=, compass: ...
            if key == "key" and not _KEY_NAME_RE.search(lower, max(0, start - 12), m.end("key")):
                continue  # cache_key, sort key ...
            is_password = key.startswith(("pass", "pwd"))
            tight = m.group("sep") == "=" and not m.group("sp1") and not m.group("sp2")
            yield from _literal_value(text, m.end(), _VALUE_RE, is_password, tight)
    if _gate_open(lower, _FLAG_GATE):
        for m in _FLAG_RE.finditer(lower):
            yield from _literal_value(text, m.end(), _FLAG_VALUE_RE, m.group("key").startswith("pass"), False)


def _literal_value(
    text: str, pos: int, value_re: re.Pattern[str], is_password: bool, tight: bool
) -> Iterator[tuple[str, int, int, int]]:
    """The assigned value at ``pos`` when it is a literal secret."""
    v = value_re.match(text, pos)
    if v is None:
        return
    group = "qv" if v.group("qv") is not None else "uv"
    if _assigned_literal(v.group(group), is_password, quoted=group == "qv", tight=tight):
        kind = "password-assignment" if is_password else "secret-assignment"
        yield kind, v.start(group), v.end(group), 4


def _assigned_literal(value: str, is_password: bool, *, quoted: bool, tight: bool) -> bool:
    """Whether an assigned value is a literal secret rather than a reference or prose."""
    if _is_placeholder(value) or len(value) < (6 if is_password else 8):
        return False
    if not quoted and _EXPRESSION_RE.search(value):
        return False
    if not is_password and value.isdigit():
        return False
    if quoted and not any(ch.isspace() for ch in value):
        return True
    if tight and is_password:
        return True
    return _looks_secret(value)


_GENERIC_CANDIDATE_RE = re.compile(r"(?<![A-Za-z0-9_+/=-])[A-Za-z0-9_+/-]{20,}={0,2}(?![A-Za-z0-9_+/=-])")
_GENERIC_KEYWORDS = ("key", "token", "secret", "passw", "pwd", "credential", "auth", "bearer")
_HEX_RE = re.compile(r"[0-9a-fA-F-]+")
_IDENT_PART_RE = re.compile(r"[A-Za-z]+[0-9]{0,3}|[0-9]+")
_PATH_SEGMENT_RE = re.compile(r"[a-z][a-z_-]{2,}")


def _generic_findings(text: str, lower: str) -> Iterator[tuple[str, int, int, int]]:
    """High-entropy tokens on the same line as, and close to, a secret-ish keyword."""
    if not _gate_open(lower, (_GENERIC_KEYWORDS,)):
        return
    for m in _GENERIC_CANDIDATE_RE.finditer(text):
        token = m.group()
        if not _generic_token_ok(token):
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.end())
        line_end = len(text) if line_end < 0 else line_end
        before = lower[max(line_start, m.start() - 48):m.start()]
        after = lower[m.end():min(line_end, m.end() + 32)]
        if any(k in before or k in after for k in _GENERIC_KEYWORDS):
            yield "generic-api-key", m.start(), m.end(), _GENERIC_PRIORITY


def _generic_token_ok(token: str) -> bool:
    """Random-looking key material: not a hash, UUID, identifier, path or base64 text."""
    core = token.rstrip("=")
    if len(core) < 20 or _HEX_RE.fullmatch(core):
        return False
    if not (any(c.isdigit() for c in core) and any(c.isalpha() for c in core)):
        return False
    parts = re.split(r"[_-]", core)
    if len(parts) >= 3 and all(_IDENT_PART_RE.fullmatch(p) for p in parts if p):
        return False
    if "/" in core and (core.startswith("/") or "//" in core
                        or any(_PATH_SEGMENT_RE.fullmatch(s) for s in core.split("/"))):
        return False
    if _entropy(core) < 3.5 or _decodes_to_text(token):
        return False
    return True


def _decodes_to_text(token: str) -> bool:
    """Base64 that decodes to printable ASCII text (a test vector, not key material), unless
    the text is a ``user:password`` pair (HTTP Basic, docker config ``auth``)."""
    if len(token) % 4:
        return False
    try:
        raw = base64.b64decode(token, validate=True)
    except (binascii.Error, ValueError):
        return False
    return bool(raw) and b":" not in raw and all(32 <= b < 127 or b in (9, 10, 13) for b in raw)


# --------------------------------------------------------------------------------------------
# Injection rules run on the lower-cased text (no IGNORECASE: a literal first token lets the
# regex engine skip ahead quickly).  ``bounded`` rules must start at a word boundary, checked
# outside the regex for the same reason.

@attrs.frozen
class _InjectionRule:
    kind: str
    regex: re.Pattern[str]
    gate: _Gate = ()
    bounded: bool = True


def _inj(kind: str, pattern: str, gate: _Gate = (), *, bounded: bool = True) -> _InjectionRule:
    return _InjectionRule(kind, re.compile(pattern, re.MULTILINE), gate, bounded)


_SENSITIVE = (
    r"(?:(?:~|\$home|\$\{home\}|%userprofile%|/root|/home/[\w.-]+|/users/[\w.-]+)/\.(?:ssh|aws"
    r"|gnupg|kube|docker|netrc|npmrc|pypirc|git-credentials|config/(?:gcloud|gh|hub|op|doctl|rclone|heroku)"
    r"|azure|bash_history"
    r"|zsh_history)"
    r"|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|/etc/(?:passwd|shadow|sudoers)\b|(?<![\w.-])\.env(?![\w.-])"
    r"|\.aws/credentials|\.ssh/)"
)
_SENSITIVE_GATE = ("~/", "$home", "${home}", "%userprofile%", "/root/", "/home/", "/users/", "id_rsa",
                   "id_dsa", "id_ecdsa", "id_ed25519", "/etc/", ".env", ".aws/", ".ssh/")
_ENV_DUMP = (r"(?:\$\(\s*(?:env|printenv)\s*\)|`\s*(?:env|printenv)\s*`|\bprintenv\b|\bos\.environ\b(?![.\[])"
             r"|\bprocess\.env\b(?![.\[]))")
_ENV_DUMP_GATE = ("printenv", "environ", "process.env", "$(", "`")
_SHELL = r"(?:sudo\s+(?:-\S+\s+)*)?(?:(?:/usr)?/bin/)?(?:ba|z|k|c|tc|da|fi|a)?sh\b"
_INTERPRETER = (r"(?:sudo\s+(?:-\S+\s+)*)?(?:python[0-9.]*|perl|ruby|node|php|pwsh|powershell|iex"
                r"|invoke-expression)(?:\s+-)?\s*(?=$|[\n;&|)`'\"])")
_DETERMINERS = (r"(?:\s+(?:all|every|any|the|your|my|our|their|its|user'?s?|current|local|stored|saved"
                r"|these|those|of|and|contents?|values?|outputs?|results?|dumps?))*\s+`?")
_SENSITIVE_NOUN = (
    r"(?:secrets?|credentials?|api[ _-]?keys?|access[ _-]?keys?|private[ _-]?keys?|ssh[ _-]?keys?"
    r"|passwords?|tokens?|env(?:ironment)?(?:[ _-]?(?:vars?|variables?))?|\.env|cookies?"
    r"|session[ _-]?ids?|conversation|chat[ _-]?history|system[ _-]?prompt)\b"
    rf"|{_SENSITIVE}"
)
# Query parameters named for what an exfiltration image carries out; not the ones badges and
# avatars use (label, message, style, s and d for size and default, text for placeholders).
_LEAK_PARAMS = (r"data|secrets?|tokens?|keys?|pass(?:word)?|pwd|creds?|credentials|history|conversation|chat"
                r"|prompt|context|memory|memories|env|leak|exfil|payload|q")
_FETCHERS = r"(?:curl|wget|fetch|iwr|irm|invoke-webrequest|invoke-restmethod)\b"

# Every rule carries a gate (a literal each of its matches contains): an injection is rare,
# so most texts run none of these regexes.
_OVERRIDE_VERBS = ("ignore", "disregard", "forget", "override")
_INJECTION_RULES: tuple[_InjectionRule, ...] = (
    _inj("override-instructions",
         r"(?:ignore|disregard|forget|override|bypass)\s+(?:(?:all|any|each|every|the|your|my|of|these"
         r"|those|such)\s+)*(?:previous|prior|above|earlier|preceding|foregoing|former|original|initial"
         r"|system|developer|safety)(?:\s+(?:and|or|&)\s+(?:following|subsequent|later|other|future))?"
         r"\s+(?:instructions?|prompts?|rules|directions?|guidelines|guidance"
         r"|messages?|context|commands?|constraints|polic(?:y|ies))\b", ((*_OVERRIDE_VERBS, "bypass"),)),
    _inj("override-instructions",
         r"(?:ignore|disregard|forget)\s+(?:all\s+|any\s+)?(?:of\s+)?(?:your|these)\s+(?:instructions"
         r"|rules|guidelines)\b", (("ignore", "disregard", "forget"),)),
    _inj("override-instructions",
         r"(?:ignore|disregard|forget|override|bypass|reveal|leak)\s+(?:the\s+|your\s+|this\s+)?"
         r"system\s+(?:prompt|message)\b", ((*_OVERRIDE_VERBS, "bypass", "reveal", "leak"), ("system",))),
    _inj("override-instructions",
         r"you\s+are\s+now\s+(?:a|an|the|my|in|no\s+longer|free|unrestricted|unfiltered|jailbroken"
         r"|dan|acting)\b", (("you",), ("now",))),
    _inj("override-instructions",
         r"(?:new|updated|revised|real|actual|true|additional|override)\s+(?:system\s+)?instructions?\s*:",
         (("instruction",),)),
    _inj("override-instructions",
         r"from\s+now\s+on,?\s+(?:you|the\s+assistant|the\s+agent)\s+(?:will|must|should|are|shall)\b",
         (("from",), ("now",))),
    _inj("override-instructions",
         r"do\s+not\s+(?:follow|obey)\s+(?:the\s+|your\s+|any\s+)?(?:previous|prior|system|developer"
         r"|original)\s+(?:instructions|prompt|rules)\b", (("follow", "obey"),)),
    _inj("fake-role-tag",
         r"<\s*/?\s*(?:system|assistant|developer|human|system[-_]?(?:prompt|message|reminder)|im_start"
         r"|im_end)\b[^<>\n]{0,80}>", (("<",),), bounded=False),
    _inj("fake-role-tag", r"<\|[a-z_]{2,30}\|>|\[/?inst\]|<</?sys>>", (("<|", "inst]", "<<"),),
         bounded=False),
    _inj("fake-role-tag",
         r"^[ \t]*#{1,6}[ \t]*(?:system|assistant|developer|user|human|instructions?)"
         r"(?:[ \t]+(?:prompt|message))?[ \t]*:", (("#",), (":",)), bounded=False),
    _inj("fake-role-tag", r"^[ \t]*(?:system|assistant|developer|human)[ \t]*:",
         (("system", "assistant", "developer", "human"), (":",)), bounded=False),
    _inj("fake-role-tag", r"<\s*/?\s*realmem(?:[-_][\w-]*)?\b[^<>]{0,200}>", (("realmem",),), bounded=False),
    _inj("exfiltration",
         rf"(?:curl|wget|nc|ncat|netcat|scp|rsync|sftp|iwr|irm|invoke-webrequest|invoke-restmethod)\b"
         rf"[^\n|;&]{{0,200}}?(?:{_SENSITIVE}|{_ENV_DUMP})",
         (("curl", "wget", "nc", "scp", "rsync", "sftp", "iwr", "irm", "invoke-"),
          _SENSITIVE_GATE + _ENV_DUMP_GATE)),
    _inj("exfiltration",
         rf"(?:cat|type|base64|tar|zip|gpg|xxd|head|tail|get-content|gc)\b[^\n|;&]{{0,200}}?"
         rf"{_SENSITIVE}[^\n|;&]{{0,100}}\|", (_SENSITIVE_GATE, ("|",))),
    _inj("exfiltration",
         r"(?:env|printenv|set)\s*\|\s*(?:curl|wget|nc|ncat|netcat|base64|mail|sendmail|ssh|telnet)\b",
         (("|",),)),
    _inj("exfiltration", r"wget\b[^\n]*?--post-(?:file|data)\b", (("--post-",),)),
    _inj("exfiltration",
         rf"(?:send|post|upload|exfiltrate|transmit|forward|leak|email|submit|beacon|copy)\b"
         rf"{_DETERMINERS}(?:{_SENSITIVE_NOUN})[^\n]{{0,120}}?(?:https?|ftp|wss?)://", (("://",),)),
    # The same in plain words, to an email address or a host by IP: "email the conversation and
    # any API keys to ops@...", "send the .env to 45.33.12.8".
    _inj("exfiltration",
         rf"(?:send|post|upload|exfiltrate|transmit|forward|leak|e-?mail|mail|submit|beacon|copy|share)\b"
         rf"{_DETERMINERS}(?:{_SENSITIVE_NOUN})[^\n]{{0,120}}?\bto\s+(?:[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
         rf"|\d{{1,3}}(?:\.\d{{1,3}}){{3}}\b)",
         (("send", "post", "upload", "exfiltrate", "transmit", "forward", "leak", "mail", "submit", "beacon", "copy",
           "share"), ("to",))),
    _inj("pipe-to-shell", rf"{_FETCHERS}[^\n|;&]*\|\s*(?:{_SHELL}|{_INTERPRETER})", (("|",),)),
    _inj("pipe-to-shell", r"(?:sh|source|\.)\s+<\(\s*(?:curl|wget)\b", (("<(",),), bounded=False),
    _inj("pipe-to-shell", r"(?:sh|eval|python[0-9.]*|perl|ruby|node|php)\b[^\n]{0,20}?[\"']?\$\(\s*(?:curl|wget)\b",
         (("$(",), ("curl", "wget")), bounded=False),
    _inj("pipe-to-shell",
         r"(?:iex|invoke-expression)\b\s*\(?\s*(?:\(\s*)?(?:iwr|irm|invoke-webrequest|invoke-restmethod"
         r"|new-object\s+(?:system\.)?net\.webclient)\b", (("iex", "invoke-expression"),)),
    # An encoded payload decoded straight into a shell: ``echo ... | base64 -d | sh``.
    _inj("pipe-to-shell",
         rf"(?:base64|base32|openssl\s+(?:base64|enc))\s+(?:-\w+\s+)*(?:-d|-di|-D|--decode)\b[^\n;&]*?\|\s*"
         rf"(?:{_SHELL}|{_INTERPRETER})", (("base64", "base32", "openssl"), ("|",))),
    _inj("pipe-to-shell", r"xxd\s+-r\b[^\n;&]*?\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b", (("xxd",), ("|",))),
    _inj("pipe-to-shell",
         r"(?:eval|exec|sh\s+-c|bash\s+-c)\b[^\n]{0,40}?(?:base64|base32)\s+(?:-\w+\s+)*(?:-d|-D|--decode)\b",
         (("base64", "base32"),)),
    # Markdown or HTML images whose URL carries data out in its query string: a template
    # slot ({...}, <...>, $VAR) or a parameter named for what it leaks.  Badge query strings
    # (?branch=, ?style=) are not matched.
    _inj("exfiltration",
         rf"(?:!\[[^\]\n]{{0,200}}\]\(\s*<?|<img\b[^>\n]{{0,200}}?src\s*=\s*[\"']?)(?:https?:)?//[^\s)\"'>]*\?"
         rf"[^\s)\"'>]*?(?:[{{<\[$]|%7b|%3c|%24|(?<=[?&])(?:{_LEAK_PARAMS})=)",
         (("![", "<img"), ("?",)), bounded=False),
    # Attempts to switch off the memory gate itself.
    _inj("override-instructions",
         r"(?:approve|accept|store|save|remember|trust|allow|whitelist|keep)\s+(?:all|every|any)\s+(?:future|subsequent"
         r"|new|later|incoming|following|other)\s+(?:memories|memory|facts?|candidates?|requests?|commands?"
         r"|changes|instructions|edits|writes)\b",
         (("approve", "accept", "store", "save", "remember", "trust", "allow", "whitelist", "keep"),
          ("all", "every", "any"))),
    _inj("override-instructions",
         r"(?:always|automatically|auto-?)\s*(?:approve|accept|store|allow)\s+(?:all|every|any|everything)\b"
         r"|never\s+(?:refuse|reject|decline|question|block)\s+(?:any|a|another)\s+(?:request|memory|fact|command"
         r"|instruction)", (("always", "auto", "never"),)),
    # "forget everything above", "disregard all of the above", "ignore what you were told"
    _inj("override-instructions",
         r"(?:ignore|disregard|forget|override)\s+(?:(?:all|everything|anything)\s+(?:of\s+)?(?:the\s+)?"
         r"(?:above|before|previously|prior|earlier|said|written)|all\s+(?:of\s+)?the\s+above\b"
         r"|the\s+above\s*(?:[.,;:!]|$|and\b|text\b)"
         r"|what\s+(?:you\s+(?:were|have\s+been)\s+told|i\s+said)\s+(?:before|above|earlier|previously))",
         (_OVERRIDE_VERBS,)),
    # "new system prompt: ...", "reveal your system prompt", "print your initial instructions"
    _inj("override-instructions",
         r"(?:new|updated|revised|real|actual|true|hidden|secret|override)\s+system\s+(?:prompt|message|rules?)\s*:"
         r"|(?:new|override)\s+(?:directives?|persona|prompt)\s*:", (("system", "directive", "persona", "prompt"),)),
    _inj("override-instructions",
         r"(?:reveal|print|show|output|repeat|display|dump|leak|tell\s+me|write\s+out)\s+(?:me\s+)?(?:your|the)"
         r"\s+(?:full\s+|entire\s+|exact\s+|original\s+|initial\s+|hidden\s+|secret\s+)*(?:system\s+prompt"
         r"|system\s+message|(?:initial|hidden|original|secret)\s+(?:prompt|instructions)|instructions\s+above"
         r"|prompt\s+above|words\s+above)",
         (("reveal", "print", "show", "output", "repeat", "display", "dump", "leak", "tell", "write"),
          ("prompt", "message", "instructions", "above"))),
    # Jailbreak personas and modes from public prompt-injection lists.
    _inj("override-instructions",
         r"(?:pretend|imagine)\s+(?:to\s+be|you\s+are|that\s+you\s+are)\s+(?:an?\s+)?(?:evil|unrestricted|unfiltered"
         r"|uncensored|jailbroken|malicious|dan\b)|\b(?:dan|developer|god|sudo|jailbreak)\s+mode\s+"
         r"(?:enabled|activated|on)\b|\bdo\s+anything\s+now\b|\bi\s+have\s+been\s+pwned\b",
         (("pretend", "imagine", "mode", "anything", "pwned"),)),
    # Instructions addressed to whichever model later reads the text (indirect injection).
    _inj("override-instructions",
         r"(?:note|message|instructions?)\s+(?:to|for)\s+(?:any\s+|all\s+|the\s+)?(?:ai|llm|language\s+model"
         r"|assistant|agent|model)s?\b|\b(?:ai|llm|assistant|agent|model)s?\s+(?:reading|processing|parsing"
         r"|summari[sz]ing)\s+this\b[^\n]{0,40}?(?:must|should|shall|will|are\s+to|need\s+to)\b",
         (("note", "message", "instruction", "reading", "processing", "parsing", "summari"),)),
    _inj("override-instructions",
         r"(?:disable|turn\s+off|deactivate|bypass|ignore)\s+"
         r"(?:your|all\s+(?:of\s+)?your|the\s+(?:assistant|agent|model)'?s?)"
         r"\s+(?:safety|content|ethical|moral)?\s*(?:filters?|guardrails|restrictions|safeguards|guidelines|rules)\b",
         (("disable", "turn", "deactivate", "bypass", "ignore"),)),
)
_INJECTION_GATES = _GatedRules(_INJECTION_RULES)
# Case matters here: ``<instructions>`` is a prompt tag, ``Vec<Instruction>`` is Rust, and
# ``[SYSTEM]`` is a role marker while ``[system]`` is a TOML table.
_CASED_TAG_RE = re.compile(r"<\s*/?\s*instructions?\b[^<>\n]{0,80}>|\[(?:SYSTEM|ASSISTANT|DEVELOPER)\]")


def _bounded_matches(rule: _InjectionRule, lower: str) -> Iterator[re.Match[str]]:
    """Matches of a rule, skipping those that start inside a word when the rule is bounded."""
    pos = 0
    while (m := rule.regex.search(lower, pos)) is not None:
        start = m.start()
        if rule.bounded and start and (lower[start - 1].isalnum() or lower[start - 1] == "_"):
            pos = start + 1
            continue
        yield m
        pos = max(m.end(), start + 1)


_BIDI_RE = re.compile("[\u202a-\u202e\u2066-\u2069]+")
_INVISIBLE_RE = re.compile("[\u200b-\u200d\u2060-\u2064\ufeff\u00ad\u180e\U000e0000-\U000e007f]+")
_HIDDEN = frozenset(
    [*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A)), *map(chr, range(0x200B, 0x200E)),
     *map(chr, range(0x2060, 0x2065)), "\ufeff", "\u00ad", "\u180e"]
)
_ZWJ, _ZWNJ = "\u200d", "\u200c"


def _is_emoji(ch: str) -> bool:
    """Emoji code points, variation selector 16 and skin-tone modifiers."""
    cp = ord(ch)
    return 0x1F000 <= cp <= 0x1FAFF or 0x2600 <= cp <= 0x27BF or 0x2300 <= cp <= 0x23FF or cp == 0xFE0F


def _joins_script(ch: str) -> bool:
    """Letters of scripts where ZWNJ is ordinary orthography (Arabic, Persian, Indic)."""
    cp = ord(ch)
    return (0x0600 <= cp <= 0x077F or 0x0900 <= cp <= 0x0D7F
            or 0xFB50 <= cp <= 0xFDFF or 0xFE70 <= cp <= 0xFEFC)


def _legit_joiner(text: str, start: int, end: int) -> bool:
    """A lone ZWJ inside an emoji sequence, or a lone ZWNJ between Arabic/Indic letters."""
    if end - start != 1 or start == 0 or end >= len(text):
        return False
    before, after = text[start - 1], text[end]
    if text[start] == _ZWJ:
        return _is_emoji(before) and _is_emoji(after)
    return text[start] == _ZWNJ and _joins_script(before) and _joins_script(after)


_NON_ASCII_RUN_RE = re.compile(r"[^\x00-\x7f]+")
_COMMENT_MARK_RE = re.compile(r"<!--+|-{2,}>")


def _normalized(text: str) -> tuple[str, list[int]]:
    """Per-character NFKC with hidden characters dropped and confusables folded to the ASCII
    they pass for (UTS #39), plus a map back to input offsets."""
    out: list[str] = []
    origin: list[int] = []
    pos = 0
    fold = confusables.table()
    for run in _NON_ASCII_RUN_RE.finditer(text):
        out.append(text[pos:run.start()])
        origin.extend(range(pos, run.start()))
        for i in range(run.start(), run.end()):
            ch = text[i]
            if ch in _HIDDEN or 0xE0000 <= ord(ch) <= 0xE007F:
                continue
            # The look-alike first (NFKC turns some into other non-ASCII letters), then NFKC.
            norm = fold.get(ch) or "".join(fold.get(c, c) for c in unicodedata.normalize("NFKC", ch))
            out.append(norm)
            origin.extend([i] * len(norm))
        pos = run.end()
    out.append(text[pos:])
    origin.extend(range(pos, len(text)))
    return "".join(out), origin


def _injection_findings(text: str, lower: str) -> list[Finding]:
    """Injection patterns in the text, inside hidden HTML comments, and in the folded form
    (NFKC, confusables) of lines whose compatibility characters (fullwidth, mathematical,
    enclosed letters) or look-alikes from other scripts spell ASCII words."""
    if "<!--" in text:
        # A comment is hidden when Markdown is rendered but read by the model: its body is
        # scanned as lines of its own (the markers blanked, so offsets carry over).
        text = _COMMENT_MARK_RE.sub(lambda m: "\n" + " " * (len(m.group()) - 1), text)
        lower = _lower(text)
    found = _rule_findings(text, lower)
    if text.isascii():
        return _dedupe(found)
    found += [Finding(INJECTION, "bidi-control", m.start(), m.end()) for m in _BIDI_RE.finditer(text)]
    found += [
        Finding(INJECTION, "invisible-character", m.start(), m.end())
        for m in _INVISIBLE_RE.finditer(text)
        if not _legit_joiner(text, m.start(), m.end())
    ]
    offset = 0
    for line in text.splitlines(keepends=True):
        norm, origin = _normalized(line) if not line.isascii() else (line, [])
        if _ascii_alnum_count(norm) > _ascii_alnum_count(line):
            for f in _rule_findings(norm, _lower(norm)):
                start = offset + origin[min(f.start, len(origin) - 1)]
                end = offset + origin[max(f.end - 1, f.start)] + 1
                found.append(Finding(INJECTION, f.kind, start, max(end, start + 1)))
        offset += len(line)
    return _dedupe(found)


_NOT_ASCII_ALNUM = bytes(b for b in range(128) if not chr(b).isalnum())


def _ascii_alnum_count(text: str) -> int:
    """ASCII letters and digits in the text; grows under NFKC when compatibility letters
    (fullwidth, mathematical, enclosed) spell out ASCII words."""
    return len(text.encode("ascii", "ignore").translate(None, _NOT_ASCII_ALNUM))


def _rule_findings(text: str, lower: str) -> list[Finding]:
    """Matches of the gated injection rules (``lower`` is ``text`` lower-cased, same length)."""
    found = [
        Finding(INJECTION, rule.kind, m.start(), m.end())
        for rule in _INJECTION_GATES.open(lower)
        for m in _bounded_matches(rule, lower)
    ]
    found += [Finding(INJECTION, "fake-role-tag", m.start(), m.end())
              for m in _CASED_TAG_RE.finditer(text)]
    return found


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """Drop findings of the same kind whose span lies inside an earlier one."""
    kept: list[Finding] = []
    reach: dict[str, int] = {}  # kind -> furthest end among kept findings
    for f in sorted(findings, key=lambda f: (f.start, -f.end)):
        if f.end > reach.get(f.kind, -1):
            kept.append(f)
            reach[f.kind] = f.end
    return kept


# --------------------------------------------------------------------------------------------
# Vendored gitleaks rules (realmem/gate/gitleaks/gitleaks.toml, MIT, see gitleaks.LICENSE; updated by
# scripts/update-gitleaks.py).  Loaded once, on the first scan, with gitleaks' own semantics:
# a rule runs only when one of its keywords occurs in the lower-cased text, its secret is the
# first non-empty capture group (or ``secretGroup``), a secret at or below the rule's entropy
# is dropped, and the global and per-rule allowlists (regexes on the secret, match or line;
# stop words in the secret) drop known non-secrets.  Go RE2 syntax is translated by
# ``_go_regex``; rules that need a file path (we scan text, not files) are skipped.

GITLEAKS_TOML = Path(__file__).parent / "gitleaks" / "gitleaks.toml"

# RE2's POSIX classes, which Python's ``re`` lacks, spelled out (ASCII, as in RE2).
_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~",
    "punct": "!-/:-@\\[-`{-~", "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_DOT_STAR_BOUND = 512
_INLINE_FLAGS_RE = re.compile(r"\(\?([imsU-]+)\)")


def _go_regex(pattern: str) -> str:
    """Translate RE2 syntax that Python's ``re`` reads differently or not at all:

    - ``[[:alnum:]]`` and the other POSIX classes are spelled out;
    - ``\\z`` (end of text) becomes ``\\Z``;
    - ``[``, ``|``, ``&``, ``~`` inside a class are escaped (Python warns about future set
      operations there);
    - a flag group ``(?i)`` after the start applies, in RE2, to the rest of its enclosing group,
      alternatives included; Python accepts global flags only at the start, so the rest of each
      alternative is wrapped in a scoped ``(?i:...)`` instead;
    - ``.*`` becomes ``.{0,512}``: RE2 runs it in linear time, Python backtracks, and the curl
      rules' ``curl\b(?:.*?|.*?(?:[\r\n]{1,2}.*?){1,5})`` then crawls through a long
      line of repeated ``curl -H``.  No memory line puts 512 characters between a command and
      its header flag.
    """
    out: list[str] = []
    # one frame per open group: the flags opened by ``(?x)`` inside it, re-opened after ``|``
    frames: list[list[str]] = [[]]
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            esc = pattern[i:i + 2]
            out.append("\\Z" if esc == "\\z" else esc)
            i += 2
        elif ch == "[":
            i = _go_class(pattern, i, out)
        elif ch == "(":
            flags = _INLINE_FLAGS_RE.match(pattern, i)
            if flags and i > 0:
                out.append(f"(?{flags.group(1)}:")
                frames[-1].append(flags.group(1))
                i = flags.end()
                continue
            if flags:
                out.append(flags.group())
                i = flags.end()
                continue
            frames.append([])
            out.append(ch)
            i += 1
        elif ch == "." and pattern.startswith("*", i + 1):
            out.append(".{0,%d}" % _DOT_STAR_BOUND)
            i += 2
        elif ch == "|":
            opened = frames[-1]
            out.append(")" * len(opened) + "|" + "".join(f"(?{f}:" for f in opened))
            i += 1
        elif ch == ")":
            opened = frames.pop() if len(frames) > 1 else []
            out.append(")" * len(opened) + ")")
            i += 1
        else:
            out.append(ch)
            i += 1
    out.append(")" * len(frames[0]))
    return "".join(out)


def _go_class(pattern: str, i: int, out: list[str]) -> int:
    """Copy the character class starting at ``pattern[i]`` to ``out``; return the index after it."""
    out.append("[")
    i += 1
    if pattern.startswith("^", i):
        out.append("^")
        i += 1
    if pattern.startswith("]", i):  # a leading ] is literal
        out.append("\\]")
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        posix = re.match(r"\[:(\^?)([a-z]+):\]", pattern[i:])
        if posix and posix.group(2) in _POSIX_CLASSES and not posix.group(1):
            out.append(_POSIX_CLASSES[posix.group(2)])
            i += posix.end()
            continue
        out.append("\\" + ch if ch in "[|&~" else ch)
        i += 1
    out.append("]")
    return i + 1


# gitleaks ends most token rules with this group: a key must be followed by a quote,
# backtick, space, ``;``, an escaped newline or the end.  In files that holds; memories are
# prose, where a key also ends a sentence or a parenthesis, so those are accepted as well.
_GITLEAKS_END = r"""(?:[\x60'"\s;]|\\[nr]|$)"""
_PROSE_END = r"""(?:[\x60'"\s;.,:!?)\]}>]|\\[nr]|$)"""


def _prose_end(pattern: str) -> str:
    return pattern[:-len(_GITLEAKS_END)] + _PROSE_END if pattern.endswith(_GITLEAKS_END) else pattern


@attrs.frozen
class _Allowlist:
    target: str  # "secret", "match" or "line": what the regexes are matched against
    regexes: tuple[str, ...]  # RE2 patterns, compiled on first use
    stopwords: tuple[str, ...]  # lower-case substrings of the secret

    def allows(self, secret: str, match: str, line: str) -> bool:
        target = {"match": match, "line": line}.get(self.target, secret)
        if target and any(_go_compile(r).search(target) for r in self.regexes):
            return True
        low = secret.lower()
        return any(w in low for w in self.stopwords)


@attrs.frozen
class _GitleaksRule:
    kind: str
    pattern: str  # RE2, compiled on first use: most rules' keywords never occur in a memory
    keywords: tuple[str, ...]
    entropy: float
    secret_group: int
    allowlists: tuple[_Allowlist, ...]
    priority: int
    anchor: str | None = None  # see _context_anchor

    @property
    def regex(self) -> re.Pattern[str]:
        return _go_compile(self.pattern)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        """``regex.finditer(text)``, trying only the starts an anchored rule can match from."""
        if self.anchor is None:
            yield from self.regex.finditer(text)
            return
        rx = self.regex
        pos = 0  # first start still to try: after the last match, and after starts already tried
        run = _go_compile(_CONTEXT_RUN)
        for k in (m.start() for m in _go_compile(self.anchor).finditer(text)):
            # a match starts inside the run of name characters that ends at its words: no
            # earlier start can match (one search instead of up to 50 failed tries)
            pos = max(pos, run.search(text, max(0, k - _CONTEXT_REACH), k).start())
            while pos <= k:
                m = rx.match(text, pos)
                if m is None:
                    pos += 1
                    continue
                yield m
                pos = max(m.end(), pos + 1)


# gitleaks' context rules (96 of them, generic-api-key among them) start with a lazy run of
# up to 50 name characters before their context words.  Python tries that run at every
# position of the text (a long run of "aaaa" is slow); RE2 does not backtrack.  A match
# can only start at most 50 characters before one of the words, so only those starts are tried.
_CONTEXT_PREFIX = r"(?i)[\w.-]{0,50}?"
_CONTEXT_REACH = 50
_CONTEXT_RUN = r"(?i)[\w.-]{0,50}\z"  # the prefix's characters, up to the end of the searched span


def _context_anchor(pattern: str) -> str | None:
    """A zero-width pattern finding every place a context rule's words begin, or None when the
    pattern does not start with the lazy name run followed by a group of context words, or
    has a second alternative at the top level (which may start anywhere)."""
    if not pattern.startswith(_CONTEXT_PREFIX + "(?:"):
        return None
    start = i = len(_CONTEXT_PREFIX)
    depth, words_end = 0, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            i = _go_class(pattern, i, [])
            continue
        if ch == "|" and depth == 0:
            return None
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and not words_end:
            words_end = i + 1
        i += 1
    return "(?i)(?=" + pattern[start:words_end] + ")"


@attrs.frozen
class GitleaksRules:
    """The loaded rule set: the rules that compiled, and why each other rule was skipped."""

    rules: tuple[_GitleaksRule, ...]
    allowlists: tuple[_Allowlist, ...]  # global
    skipped: dict[str, str]  # rule id -> reason
    # the prefilter: each distinct keyword with the indexes of the rules it opens, and the
    # rules without keywords (always run); the keywords are found by ``_needles_in``'s one pass
    by_keyword: Mapping[str, tuple[int, ...]] = attrs.field(factory=dict)
    always: tuple[int, ...] = ()

    def candidates(self, lower: str) -> list[_GitleaksRule]:
        """The rules whose keywords occur in ``lower``, in file order."""
        hits = set(self.always)
        found = _needles_in(lower)
        own = [k for k in self._own_keywords if k in lower]
        for keyword in (*found, *own):
            hits.update(self.by_keyword.get(keyword, ()))
        return [self.rules[i] for i in sorted(hits)]

    @functools.cached_property
    def _own_keywords(self) -> tuple[str, ...]:
        """Keywords ``_needles_in`` does not look for: a rule file other than the vendored one
        (the update script's) may have keywords of its own.  Worked out once, not per text."""
        return tuple(sorted(self.by_keyword.keys() - _all_needles()))


@functools.cache
def _go_compile(pattern: str) -> re.Pattern[str]:
    """Translate and compile an RE2 pattern; RE2 classes (\\w \\d \\s \\b) are ASCII-only."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a translation gap must fail loudly, not warn
        return re.compile(_go_regex(pattern), re.ASCII)


def _allowlist(spec: dict[str, Any]) -> _Allowlist | None:
    """An allowlist as gitleaks applies it to text; None when it can never apply here
    (an AND condition that includes paths or commits, which text has not)."""
    if spec.get("condition", "OR").upper() == "AND" and (spec.get("paths") or spec.get("commits")):
        return None
    regexes = tuple(spec.get("regexes", ()))
    stopwords = tuple(w.lower() for w in spec.get("stopwords", ()))
    if not regexes and not stopwords:
        return None  # paths or commits only
    return _Allowlist(spec.get("regexTarget", "secret"), regexes, stopwords)


def load_gitleaks(path: Path = GITLEAKS_TOML, *, compile_all: bool = True) -> GitleaksRules:
    """Read a gitleaks config; every rule whose regexes compile is loaded.  Without
    ``compile_all`` nothing is compiled here (the tests prove the vendored file compiles)."""
    with path.open("rb") as fh:
        config = tomllib.load(fh)
    glob = config.get("allowlist")
    glob_lists = [glob, *config.get("allowlists", [])] if glob else config.get("allowlists", [])
    rules: list[_GitleaksRule] = []
    skipped: dict[str, str] = {}
    for spec in config.get("rules", []):
        rid = spec["id"]
        if "regex" not in spec or "path" in spec:
            skipped[rid] = "needs a file path"
            continue
        pattern = _prose_end(spec["regex"])
        lists = tuple(a for a in map(_allowlist, spec.get("allowlists", [])) if a is not None)
        try:
            anchor = _context_anchor(pattern)
            for p in (pattern, *(r for a in lists for r in a.regexes), *filter(None, [anchor])) if compile_all else ():
                _go_compile(p)
        except (re.error, Warning) as exc:
            skipped[rid] = f"does not compile: {exc}"
            continue
        rules.append(_GitleaksRule(
            rid, pattern, tuple(k.lower() for k in spec.get("keywords", [])), float(spec.get("entropy", 0.0)),
            int(spec.get("secretGroup", 0)), lists, priority=_GENERIC_PRIORITY if "generic" in rid else 1,
            anchor=anchor))
    by_keyword: dict[str, list[int]] = {}
    for i, rule in enumerate(rules):
        for keyword in rule.keywords:
            by_keyword.setdefault(keyword, []).append(i)
    global_lists = tuple(a for a in map(_allowlist, glob_lists) if a is not None)
    for p in (r for a in global_lists for r in a.regexes) if compile_all else ():
        _go_compile(p)  # a global allowlist that does not compile is an error for the whole file
    return GitleaksRules(
        tuple(rules), global_lists, skipped,
        {k: tuple(v) for k, v in by_keyword.items()}, tuple(i for i, r in enumerate(rules) if not r.keywords))


@functools.cache
def gitleaks_rules() -> GitleaksRules:
    """The vendored rule set, loaded on first use; each regex is compiled when its keyword
    first occurs (compiling them all costs far more than parsing the file)."""
    return load_gitleaks(compile_all=False)


def _line_at(text: str, start: int, end: int) -> str:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    return text[line_start:len(text) if line_end < 0 else line_end]


def _gitleaks_findings(text: str, lower: str) -> Iterator[tuple[str, int, int, int]]:
    """Secrets found by the vendored gitleaks rules whose keywords occur in the text."""
    loaded = gitleaks_rules()
    for rule in loaded.candidates(lower):
        for m in rule.finditer(text):
            span = _gitleaks_secret_span(m, rule.secret_group)
            if span is None:
                continue
            secret = text[span[0]:span[1]]
            if rule.entropy and _entropy(secret) <= rule.entropy:
                continue
            if rule.priority == _GENERIC_PRIORITY and _decodes_to_text(secret):
                continue  # the generic rule's base64 branch also takes encoded text fixtures
            match, line = m.group().strip("\n"), _line_at(text, m.start(), m.end())
            if any(a.allows(secret, match, line) for a in (*loaded.allowlists, *rule.allowlists)):
                continue
            yield rule.kind, span[0], span[1], rule.priority


def _gitleaks_secret_span(m: re.Match[str], group: int) -> tuple[int, int] | None:
    """The secret's span: ``secretGroup`` when set, else the first non-empty group, else the
    whole match without surrounding newlines (as gitleaks does)."""
    if group:
        return m.span(group) if m.group(group) else None
    for g in range(1, (m.re.groups or 0) + 1):
        if m.group(g):
            return m.span(g)
    start, end = m.span()
    while start < end and m.string[start] == "\n":
        start += 1
    while end > start and m.string[end - 1] == "\n":
        end -= 1
    return (start, end) if end > start else None


# --------------------------------------------------------------------------------------------
# Vendored detect-secrets patterns (realmem/gate/detect_secrets/patterns.json, Apache-2.0, see
# detect_secrets.LICENSE; updated by scripts/update-detect-secrets.py): the regexes of its
# regex plugins (not the keyword or high-entropy ones), Python syntax already.  Its secret is
# the first non-empty group, as detect-secrets yields it.  Its rules were written for files and
# verified later; in prose a few (Artifactory's ``AP…``) also match words, so a secret must look
# random (realmem's ``_looks_secret``) and must not be a placeholder.

DETECT_SECRETS_JSON = Path(__file__).parent / "detect_secrets" / "patterns.json"
# Below gitleaks' and realmem's token rules (their kinds are more specific: ``github-pat``,
# ``credentialed-url`` over ``basic-auth-credentials``), above the assignment and generic rules.
_DS_PRIORITY = 3
# Plugins whose match is a marker line, not a value: the marker alone is the finding.
_DS_MARKERS = frozenset({"PrivateKeyDetector"})
# Plugins with a structural check of their own (detect-secrets' ``is_formally_valid``).
_DS_CHECKS: dict[str, Callable[[str], bool]] = {"JwtTokenDetector": lambda s: _jwt_header_ok(s)}


@attrs.frozen
class DetectSecretsRules:
    """The loaded patterns, gated like realmem's own rules."""

    rules: tuple[_Rule, ...]
    version: str

    @functools.cached_property
    def gates(self) -> _GatedRules[_Rule]:
        return _GatedRules(self.rules)


def _literal_gate(pattern: str, flags: int) -> _Gate:
    """Needle groups every match must contain, read from the parsed pattern's top level: each
    literal run of three or more characters, and each group of literal alternatives (two or
    more characters each).  Patterns without one (Discord, Telegram, Twilio) run always."""
    gate: list[tuple[str, ...]] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) >= 3:
            gate.append(("".join(run).lower(),))
        run.clear()

    def literal(items: Any) -> str | None:
        if not all(op is _sre.LITERAL for op, _ in items):
            return None
        return "".join(chr(c) for _, c in items)

    for op, av in _sre.parse(pattern, flags):
        if op is _sre.LITERAL:
            run.append(chr(av))
            continue
        flush()
        if op is _sre.SUBPATTERN:
            body = list(av[-1])
            if len(body) == 1 and body[0][0] is _sre.BRANCH:
                alts = [literal(list(alt)) for alt in body[0][1][1]]
                if all(a is not None and len(a) >= 2 for a in alts):
                    gate.append(tuple(sorted({a.lower() for a in alts if a is not None})))
    flush()
    return tuple(gate)


def load_detect_secrets(path: Path = DETECT_SECRETS_JSON) -> DetectSecretsRules:
    """Read the vendored patterns; a pattern that does not compile is an error (the update
    script refuses such a file)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    rules: list[_Rule] = []
    for spec in doc["patterns"]:
        flags = functools.reduce(lambda acc, f: acc | getattr(re, f), spec["flags"], 0)
        kind = re.sub(r"[^a-z0-9]+", "-", spec["secret_type"].lower()).strip("-")
        plugin = spec["plugin"]
        rules.append(_Rule(kind, re.compile(spec["pattern"], flags), _literal_gate(spec["pattern"], flags),
                           priority=_DS_PRIORITY, check=_ds_check(plugin)))
    return DetectSecretsRules(tuple(rules), str(doc["version"]))


def _ds_check(plugin: str) -> Callable[[re.Match[str]], bool] | None:
    if plugin in _DS_MARKERS:
        return None
    structural = _DS_CHECKS.get(plugin, lambda s: True)

    def check(m: re.Match[str]) -> bool:
        start, end = _ds_span(m)
        secret = m.string[start:end]
        return not _is_placeholder(secret) and _looks_secret(secret) and structural(secret)
    return check


def _ds_span(m: re.Match[str]) -> tuple[int, int]:
    """The secret as detect-secrets yields it: the first non-empty group, else the match
    without the delimiters some patterns match around it (Artifactory's ``(?:\\s|=|:|"|^)``)."""
    g = next((i for i in range(1, (m.re.groups or 0) + 1) if m.group(i)), 0)
    start, end = m.span(g)
    if not g:
        while start < end and m.string[start] in _DS_DELIMITERS:
            start += 1
        while end > start and m.string[end - 1] in _DS_DELIMITERS:
            end -= 1
    return start, end


_DS_DELIMITERS = frozenset(" \t\r\n\"'=:")


@functools.cache
def detect_secrets_rules() -> DetectSecretsRules:
    """The vendored patterns, loaded on first use."""
    return load_detect_secrets()


def _detect_secrets_findings(text: str, lower: str) -> Iterator[tuple[str, int, int, int]]:
    """Secrets found by the vendored detect-secrets patterns whose gates are open."""
    for rule in detect_secrets_rules().gates.open(lower):
        for m in rule.regex.finditer(text):
            if rule.check is None or rule.check(m):
                start, end = _ds_span(m)
                if end > start:
                    yield rule.kind, start, end, rule.priority


# --------------------------------------------------------------------------------------------
# Secrets: collect, merge overlapping spans

def _raw_secrets(text: str, lower: str, *, decode: bool = True) -> Iterator[tuple[str, int, int, int]]:
    """(kind, start, end, priority) for every secret rule match; with ``decode``, also base64
    runs whose decoded text holds one."""
    for rule in _TOKEN_GATES.open(lower):
        for m in rule.regex.finditer(text):
            if (rule.check is None or rule.check(m)) and m.end(rule.group) > m.start(rule.group):
                yield rule.kind, m.start(rule.group), m.end(rule.group), rule.priority
    yield from _gitleaks_findings(text, lower)
    if "://" in text:
        yield from _credentialed_urls(text)
    yield from _assignment_findings(text, lower)
    yield from _generic_findings(text, lower)
    yield from _detect_secrets_findings(text, lower)  # last: on a tie, realmem's and gitleaks' kind
    if decode:
        yield from _base64_findings(text)


# A run of base64 (standard or URL-safe alphabet) long enough to hide a token.
_BASE64_RUN_RE = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/_-]{20,}={0,2}(?![\w+/=-])")
_BASE64_PRIORITY = 1  # what the decoded secret is, is known: above the generic rules


def _base64_findings(text: str) -> Iterator[tuple[str, int, int, int]]:
    """A secret written base64-encoded (a Kubernetes Secret's ``data``, a docker config
    ``auth``, an ``echo ... | base64`` in a runbook): each run that decodes to text is scanned
    once more (not again inside), and the whole run is the secret."""
    for m in _BASE64_RUN_RE.finditer(text):
        decoded = _base64_text(m.group())
        if decoded is None:
            continue
        inner = _secret_findings(decoded, _lower(decoded), decode=False)
        if inner:
            yield f"{inner[0].kind}-base64", m.start(), m.end(), _BASE64_PRIORITY


def _base64_text(run: str) -> str | None:
    """The UTF-8 text ``run`` encodes, or None (binary, not base64, or not text)."""
    alphabet = "-_" if ("-" in run or "_" in run) else "+/"
    if alphabet == "-_" and ("+" in run or "/" in run):
        return None  # a path or an identifier, not one encoding
    body = run.rstrip("=")
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=alphabet.encode() if alphabet == "-_" else None,
                               validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if len(decoded) < 8 or not all(ch.isprintable() or ch in "\t\r\n" for ch in decoded):
        return None
    return decoded


# Public keys, certificates and digests are meant to be shared: nothing inside one is a
# secret.  Bodies are base64 or hex only, so a span never swallows a token or a private key.
_PUBLIC_KEY_RE = re.compile(
    r"(?:ssh-(?:rsa|dss|ed25519|ed448)|ecdsa-sha2-nistp(?:256|384|521)"
    r"|sk-(?:ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)[ \t]+AAAA[A-Za-z0-9+/]+={0,3}"
    r"|-----BEGIN (?P<pem>(?:(?:RSA |EC |DSA |SSH2 |PGP )?PUBLIC KEY(?: BLOCK)?|CERTIFICATE))-----"
    r"[A-Za-z0-9+/=\s:,.()-]*?-----END (?P=pem)-----"
    r"|(?<![a-z0-9])age1[02-9ac-hj-np-z]{58}(?![a-z0-9])"
    r"|(?i:\b(?:sha(?:1|224|256|384|512)|md5|h1)[:-])(?:[0-9a-fA-F]{32,128}|[A-Za-z0-9+/]{20,}={0,2})"
    r"(?![A-Za-z0-9+/=_-])"
    # Where a secret is kept is not the secret: an AWS ARN (Secrets Manager, SSM, KMS).
    r"|\barn:aws[\w-]*:[\w-]+:[\w-]*:\d{12}:[\w/+=,.@:-]+"
    # A Google OAuth client id is public (it ships in every web page that signs in with it).
    r"|\b\d{6,20}-[a-z0-9]{32}\.apps\.googleusercontent\.com\b")
_PUBLIC_GATE = ("ssh-", "ecdsa-", "public key", "certificate", "age1", "sha", "md5", "h1:", "h1-", "arn:aws",
                "googleusercontent")
# Documentation placeholders: AWS's documented keys end in EXAMPLE (AKIAIOSFODNN7EXAMPLE,
# ...EXAMPLEKEY), and vendors' docs spell out that a token is not real.
_DOC_PLACEHOLDER_RE = re.compile(r"(?i)example|placeholder|not[-_]?a[-_]?real|dummy|x{8}")


_SHORT_ID_RE = re.compile(r"[A-Za-z0-9_-]{22}")
_UUID7_FROM_MS, _UUID7_TO_MS = 1_577_836_800_000, 4_102_444_800_000  # 2020 .. 2100


def _is_short_uuid7(token: str) -> bool:
    """A realmem id as shown to models (22-character base64url UUIDv7 with a plausible
    timestamp): a memory may name another one next to the word "key"; a random key has
    about one chance in 6,000 to look like this."""
    if not _SHORT_ID_RE.fullmatch(token):
        return False
    raw = base64.urlsafe_b64decode(token + "==")
    ms = int.from_bytes(raw[:6], "big")
    return raw[6] >> 4 == 7 and raw[8] >> 6 == 2 and _UUID7_FROM_MS <= ms < _UUID7_TO_MS


def _public_spans(text: str, lower: str) -> list[tuple[int, int]]:
    if not any(g in lower for g in _PUBLIC_GATE):
        return []
    return [m.span() for m in _PUBLIC_KEY_RE.finditer(text)]


def _secret_findings(text: str, lower: str, *, decode: bool = True) -> list[Finding]:
    """Secret spans merged where they overlap; each region takes its most specific kind.
    Spans inside a public key or certificate, documentation placeholders and realmem ids found
    only by a generic rule are dropped."""
    raw = [r for r in _raw_secrets(text, lower, decode=decode)
           if not _DOC_PLACEHOLDER_RE.search(text, r[1], r[2])
           and not (r[3] == _GENERIC_PRIORITY and _is_short_uuid7(text[r[1]:r[2]]))]
    if raw:  # most texts hold no secret: their public keys need not be looked for
        public = _public_spans(text, lower)
        raw = [r for r in raw if not any(p_start <= r[1] and r[2] <= p_end for p_start, p_end in public)]
    regions: list[tuple[int, int, int, str]] = []  # start, end, priority, kind
    for kind, start, end, priority in sorted(raw, key=lambda r: (r[1], -r[2])):
        if regions and start < regions[-1][1]:
            r_start, r_end, r_prio, r_kind = regions[-1]
            best = (priority, kind) if priority < r_prio else (r_prio, r_kind)
            regions[-1] = (r_start, max(r_end, end), *best)
        else:
            regions.append((start, end, priority, kind))
    return [Finding(SECRET, kind, start, end) for start, end, _, kind in regions]


def _redact(text: str, findings: list[Finding], offset: int = 0) -> str:
    """Replace each secret span (shifted by ``offset`` and clipped to the text) by a marker."""
    out: list[str] = []
    pos = 0
    for f in findings:
        start, end = max(f.start - offset, 0), min(f.end - offset, len(text))
        if f.category != SECRET or start >= end or start < pos:
            continue
        out.append(text[pos:start])
        out.append(f"[REDACTED:{f.kind}]")
        pos = end
    out.append(text[pos:])
    return "".join(out)


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _lower(text: str) -> str:
    """Lower-cased text with the same length, so offsets carry over."""
    lower = text.lower()
    if len(lower) != len(text):  # a few characters (e.g. U+0130) grow when lower-cased
        lower = text.translate(_ASCII_LOWER)
    return lower


def _findings(text: str) -> list[Finding]:
    """All findings, ordered by position."""
    lower = _lower(text)
    found = _secret_findings(text, lower) + _injection_findings(text, lower)
    return sorted(found, key=lambda f: (f.start, f.end))


def scan(text: str, *, redact: bool = False) -> ScanResult:
    """Scan one text.  With ``redact``, secrets are masked and only injection refuses."""
    findings = _findings(text)
    injected = any(f.category == INJECTION for f in findings)
    if redact and not injected:
        return ScanResult(ok=True, findings=tuple(findings), text=_redact(text, findings))
    return ScanResult(ok=not findings, findings=tuple(findings), text=text)


def scan_memory(caption: str, content: str, *, redact: bool = False) -> tuple[ScanResult, str, str]:
    """Scan a candidate's caption and content together (joined by a newline; spans refer to
    that joined text) and return the result with the possibly redacted caption and content."""
    joined = f"{caption}\n{content}"
    result = scan(joined, redact=redact)
    if not (redact and result.ok and result.findings):
        return result, caption, content
    return (result, *mask_memory(caption, content, result))


def mask_memory(caption: str, content: str, result: ScanResult) -> tuple[str, str]:
    """Caption and content with every secret of a ``scan_memory`` result masked, whatever else
    was found (a refused candidate is recorded this way, so its secret is never stored)."""
    secrets = [f for f in result.findings if f.category == SECRET]
    return _redact(caption, secrets), _redact(content, secrets, offset=len(caption) + 1)


def scan_paths(paths: Sequence[str]) -> ScanResult:
    """Scan a memory's paths: the same rules as its text, one path a line (so no rule reads
    across two of them).  Never redacted: a path with a marker in it names nothing."""
    return scan("\n".join(paths)) if paths else ScanResult(ok=True, findings=(), text="")


def mask_found(text: str, *results: ScanResult) -> str:
    """``text`` with every secret the ``results`` found (in the texts they scanned) masked
    wherever it occurs, and any secret of its own: for a copy of a scanned text in another
    form (a path made absolute, the fact file a caption and content came from)."""
    for r in results:
        for f in sorted((f for f in r.findings if f.category == SECRET), key=lambda f: f.start - f.end):
            secret = r.text[f.start:f.end]  # the longest first: one that holds another goes whole
            if secret:
                text = text.replace(secret, f"[REDACTED:{f.kind}]")
    return mask_secrets(text)


def mask_secrets(text: str) -> str:
    """The text with every secret masked (for log lines and error messages)."""
    return _redact(text, _secret_findings(text, _lower(text)))
