"""One HTTP request, retried with exponential backoff on the faults a busy registry produces.

Retried: HTTP 429 and 5xx, dropped or refused connections, timeouts. Never retried: 4xx other
than 429 (the request is wrong; repeating it cannot help), a host name DNS says does not exist,
a plain-HTTP answer to HTTPS, and a refused connection on this machine (nothing listens there;
each one error at once, naming the cause). A request that is not idempotent
(a POST that creates something) is only retried when the server said it did not take it (429,
503); a dropped connection could hide a success, so it ends with an error instead of a duplicate.
`Retry-After` is honoured up to `max_delay`. Every wait has a deadline (`timeout` per connect and
per read: a registry that accepts connections and says nothing, as a frozen one does, is a fault
like any other). The last fault ends as ONE RapidshipError with the attempts and the time they took.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlsplit

import requests

from rapidship.errors import RapidshipError
from rapidship.redact import host_of

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
NOT_TAKEN = frozenset({429, 503})
_DROPPED = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)
# faults that cannot heal, failed at once: a name DNS says does not exist (not EAI_AGAIN's
# "temporary failure", which may), and an HTTP server answering an HTTPS client
NO_SUCH_HOST = ("Name or service not known", "No address associated with hostname", "nodename nor servname")
PLAIN_HTTP = ("WRONG_VERSION_NUMBER", "wrong version number", "record layer failure", "http request")
# a refused connection to this machine: nothing listens on that port, and waiting will not start it
# (elsewhere a refusal may be a registry restarting behind its balancer: retried)
REFUSED = ("Connection refused", "connection refused", "[Errno 111]")
LOOPBACK = ("localhost", "127.", "::1", "[::1]")


def refused_on_loopback(text: str, host: str | None) -> bool:
    return bool(host) and str(host).startswith(LOOPBACK) and any(m in text for m in REFUSED)


def nothing_listens(what: str, netloc: str) -> RapidshipError:
    return RapidshipError(what, f"nothing listens on {host_of(netloc)} (connection refused on this machine)",
                          "start the registry (`invoke registry.up` for the loopback one) or check the host and "
                          "port the flags or variables name")


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6          # 1 try + 5 retries: 0.5+1+2+4+8 s of backoff at most before jitter
    base_delay: float = 0.5
    max_delay: float = 30.0
    timeout: float = 60.0      # seconds per connect and per read

    @classmethod
    def from_env(cls) -> "RetryPolicy":
        """RAPIDSHIP_RETRY_ATTEMPTS / RAPIDSHIP_RETRY_BASE_DELAY / RAPIDSHIP_RETRY_TIMEOUT tune it for
        slow or flaky sites."""
        import os

        try:
            return cls(attempts=max(1, int(os.environ.get("RAPIDSHIP_RETRY_ATTEMPTS", cls.attempts))),
                       base_delay=max(0.0, float(os.environ.get("RAPIDSHIP_RETRY_BASE_DELAY", cls.base_delay))),
                       timeout=max(0.1, float(os.environ.get("RAPIDSHIP_RETRY_TIMEOUT", cls.timeout))))
        except ValueError:
            raise RapidshipError("RAPIDSHIP_RETRY_ATTEMPTS / RAPIDSHIP_RETRY_BASE_DELAY / RAPIDSHIP_RETRY_TIMEOUT",
                                 "not a number", "set an integer count and a delay and a timeout in seconds") from None


OnRetry = Callable[[int, str, float], None]
# the slowest transfer a skopeo copy is given: N bytes have policy.timeout + N / MIN_RATE seconds
MIN_RATE = 1_000_000


def copy_deadline(policy: RetryPolicy, size: int) -> float:
    """Pure: seconds one skopeo copy of `size` bytes may take (skopeo's own HTTP client waits on a
    silent registry forever once connected)."""
    return policy.timeout + size / MIN_RATE


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _reason(err: Exception) -> str:
    text = str(err)
    return text[text.rfind("(") + 1:].rstrip(")") if "(" in text else text


def backoff(policy: RetryPolicy, attempt: int, retry_after: float | None = None) -> float:
    """Pure: seconds to wait after failed attempt number `attempt` (1-based)."""
    delay = min(policy.max_delay, policy.base_delay * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
    if retry_after is not None:
        delay = max(delay, min(retry_after, policy.max_delay))
    return delay


def send(session: requests.Session, method: str, url: str, *, policy: RetryPolicy, what: str,
         idempotent: bool = True, on_retry: OnRetry | None = None, **kwargs) -> requests.Response:
    """Send, retrying transient faults; return the first response that is not one."""
    path = urlsplit(url).path  # never the query: upload URLs carry session state
    fault = ""
    start = time.monotonic()
    for attempt in range(1, policy.attempts + 1):
        retry_after = None
        try:
            # verify passed per request: requests lets $REQUESTS_CA_BUNDLE override session.verify
            resp = session.request(method, url, timeout=policy.timeout, verify=kwargs.pop("verify", session.verify),
                                   **kwargs)
        except requests.exceptions.SSLError as err:
            host = host_of(url)  # every host in a message goes through the one redaction rule
            if any(m in str(err) for m in PLAIN_HTTP):  # the server answered in plain HTTP: no retry heals that
                raise RapidshipError(what, f"{host} answered in plain HTTP, not HTTPS",
                                     "rapidship speaks HTTPS only (docs/supply-chain.md): serve the registry with "
                                     "TLS (for loopback a throwaway CA, then --ca-cert / RAPIDSHIP_REGISTRY_CA)") from None
            raise RapidshipError(what, f"TLS verification failed for {host}: {_reason(err)}",
                                 "pass the CA bundle that signs its certificate (--ca-cert or the *_CA variable)") from None
        except _DROPPED as err:
            if refused_on_loopback(str(err), urlsplit(url).hostname):
                raise nothing_listens(what, url) from None
            if any(m in str(err) for m in NO_SUCH_HOST):  # DNS says the name does not exist: no retry heals that
                raise RapidshipError(what, f"no such host: {host_of(url)} does not resolve",
                                     "check the registry's name (the flag, harbor/harbor.yaml, or the variable "
                                     "that sets it) and the machine's DNS") from None
            fault = (f"no answer from {host_of(url)} within {policy.timeout:g} s ({err.__class__.__name__})"
                     if isinstance(err, requests.Timeout) else f"connection failed ({err.__class__.__name__})")
            if not idempotent:
                raise RapidshipError(what, f"{method} {path}: {fault}; not retried because it may have "
                                     "been applied", "check the state and run again") from None
        else:
            if resp.status_code not in RETRY_STATUS or (not idempotent and resp.status_code not in NOT_TAKEN):
                return resp
            fault = f"HTTP {resp.status_code}"
            retry_after = _retry_after(resp.headers.get("Retry-After"))
            resp.close()
        if attempt == policy.attempts:
            break
        delay = backoff(policy, attempt, retry_after)
        if on_retry:
            on_retry(attempt, f"{fault} on {method} {path}", delay)
        time.sleep(delay)
    raise RapidshipError(what, f"gave up after {policy.attempts} attempts in {time.monotonic() - start:.0f} s; last "
                         f"fault: {fault} on {method} {path}",
                         "the registry or the network is failing persistently: check it, then run again")
