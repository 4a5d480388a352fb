"""Pure, stdlib only: a value that may hold a credential, as it may appear in a message, log or record.

Credentials do not only sit where `scheme://user:password@host` puts them: a mistyped flag puts
them after the host (`host:5000@user:password/x`), a mirror token sits in a query value
(`?private_token=...`) or a fragment. So, wherever it is in the string:
  - everything before the last `@` is hidden, and what follows it up to the next `/` too unless
    it is a host name and what precedes is not (`***@harbor.example:443/x`), so the message
    still says where when it safely can;
  - every query value and the fragment are hidden (`?private_token=***`);
  - the `/t/<token>/` segment of anaconda.org-style channel URLs is hidden.
What is left is the scheme, host names and the path: enough to say which URL is meant.
"""

from __future__ import annotations

import base64
import re
from urllib.parse import parse_qsl, unquote, urlsplit

MASK = "***"
_HOST = re.compile(r"^(localhost|[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?$")
_TOKEN = re.compile(r"(^|/)t/[^/?#]+")


def redact(value: str) -> str:
    """`value` with everything that may be a credential replaced by ***."""
    text = str(value)
    head, query, fragment = text, "", ""
    if "#" in head:
        head, _, fragment = head.partition("#")
        fragment = "#" + MASK
    if "?" in head:
        head, _, raw = head.partition("?")
        query = "?" + "&".join(_mask_pair(p) for p in raw.split("&"))
    scheme, sep, rest = head.partition("://")
    if not sep:
        scheme, rest = "", head
    if "@" in rest:  # a password may hold "/" itself: nothing before the last "@" is shown
        before, _, after = rest.rpartition("@")
        host, slash, tail = after.partition("/")
        # "host:5000@tok.en/x": when the left side is the host, the right one is the credential
        shown = _HOST.match(host) and not _HOST.match(before.rpartition("/")[2])
        rest = f"{MASK}@{host if shown else MASK}{slash}{tail}"
    path = _TOKEN.sub(lambda m: f"{m.group(1)}t/{MASK}", rest)
    return (f"{scheme}://" if sep else "") + path + query + fragment


def host_of(url: str) -> str:
    """Where `url` points, for a message that names a host: its netloc (or `url` itself when it
    has no scheme) as redact() shows it, so user:password@ never reaches an error."""
    netloc = urlsplit(url).netloc if "://" in url else url.partition("/")[0]
    return redact(netloc)


def _mask_pair(pair: str) -> str:
    """`key=***` where the pair has a value; a bare item (`?TOKEN`, `?TOKEN=`) may be the secret itself."""
    key, eq, value = pair.partition("=")
    return f"{key}={MASK}" if eq and value else MASK


MIN_SECRET = 6  # shorter parts (a user name like "ci") would match everywhere and prove nothing


def secret_forms(value: str) -> list[tuple[str, str]]:
    """(what, text) for every form in which a build tool may write a secret value: each
    whitespace-separated part; of a URL its password, the user of a token-only URL, each query
    value and a `/t/<token>/` segment, each also URL-decoded; and base64("user:password"), a
    docker config's `auth`. The gates search images for them; the build scrubs them from its log."""
    forms: list[tuple[str, str]] = []
    for part in (value or "").split():
        forms.append(("", part))
        url = urlsplit(part)
        pieces: list[tuple[str, str]] = []
        if url.password:
            pieces.append(("password part", url.password))
        elif url.username:
            pieces.append(("token in the user part", url.username))
        pieces += [("query value", v) for _, v in parse_qsl(url.query, keep_blank_values=False)]
        pieces += [("path token", m.group(1)) for m in re.finditer(r"/t/([^/?#]+)", url.path)]
        for what, raw in pieces:
            forms += [(what, text) for text in dict.fromkeys((raw, unquote(raw))) if len(text) >= MIN_SECRET]
        if url.username and url.password:
            for user, password in dict.fromkeys(((url.username, url.password),
                                                 (unquote(url.username), unquote(url.password)))):
                forms.append(("base64 user:password, as in a docker config",
                              base64.b64encode(f"{user}:{password}".encode()).decode()))
    # a password given alone may still sit in a docker config's auth, base64("<any user>:<it>"): the
    # characters its own bytes decide, at each of the three offsets it can start at
    for what, text in list(forms):
        if what in ("", "password part") and "://" not in text:
            forms += [("base64 inside user:password, any user", inner) for inner in base64_inner(text)]
    return list(dict.fromkeys(forms))


def base64_inner(value: str, least: int = 8) -> list[str]:
    """The base64 characters that depend on `value`'s bytes alone when it is encoded after 0, 1 or 2
    bytes of anything else (whole 4-character groups inside it); those of at least `least` characters."""
    raw = value.encode()
    out = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        first, last = -(-shift // 3), (shift + len(raw)) // 3   # the groups of 3 bytes that are all its own
        inner = encoded[4 * first:4 * last]
        if len(inner) >= least:
            out.append(inner)
    return out


def scrub(text: str, values: list[str]) -> str:
    """`text` (a log line, an error tail) with every form of every secret value replaced: whole
    URLs by their redact() form, the other forms by ***. Longest first, so a URL is replaced whole
    before its parts."""
    forms = sorted({form for value in values for _, form in secret_forms(value)}, key=len, reverse=True)
    for form in forms:
        if form in text:
            text = text.replace(form, redact(form) if "://" in form or "@" in form else MASK)
    return text
