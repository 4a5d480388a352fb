"""A credential is hidden wherever it sits in a URL-like value: messages, logs and records use one
function (rapidship.redact), the builder's own copy (install_lock.public_url) keeps none either."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, settings, strategies as st

from support.commands import ROOT

from rapidship.builder.install_lock import public_url
from rapidship.errors import ConfigError
from rapidship.publish.oci import split_repository
from rapidship.redact import redact

SECRET = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~%!$&'()*+,;=:/",
                 min_size=6, max_size=24).map(lambda s: "Zq9" + s.replace("@", "").replace("?", "").replace("#", ""))
HOST = st.sampled_from(["harbor.example.internal", "localhost", "127.0.0.1", "mirror.example:8443", "localhost:5000"])
WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)

# Every place a credential is seen in practice, the secret marked {s}: userinfo (user, password,
# both), after the host by mistake, query values (one of several), the fragment, a /t/<token>/ path.
POSITIONS = ["https://{s}@{h}/{w}", "https://{w}:{s}@{h}/{w}", "https://{s}:{w}@{h}/{w}", "{w}:{s}@{h}/{w}",
             "{h}@{w}:{s}/{w}", "{h}@{s}/{w}", "https://{h}@{w}:{s}/{w}", "https://{h}/{w}?private_token={s}",
             "https://{h}/{w}?a={w}&token={s}&b={w}", "https://{h}/{w}#{s}", "https://{h}/t/{s}/{w}",
             "https://{w}:{s}@{h}/{w}?x={s}#{s}", "{h}/{w}?{s}"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(POSITIONS), SECRET, HOST, WORD)
def test_a_planted_secret_never_survives_redaction(position, secret, host, word):
    value = position.format(s=secret, h=host, w=word)
    assert secret not in redact(value), (value, redact(value))
    # the builder keeps scheme, host and path of a mirror URL, parsed as RFC 3986 reads it (an
    # unencoded "/" ends the userinfo there: such a "secret" is a path, as for every URL client)
    if "://" in value and "/t/" not in value and "/" not in secret:
        assert secret not in public_url(value), (value, public_url(value))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(POSITIONS), SECRET, HOST, WORD)
def test_split_repository_refuses_credentials_without_echoing_them(position, secret, host, word):
    value = position.format(s=secret, h=host, w=word)
    with pytest.raises(ConfigError) as err:
        split_repository(value)
    assert secret not in str(err.value)


def test_what_is_not_a_credential_stays_readable():
    assert redact("harbor.example.internal/staging/rapids") == "harbor.example.internal/staging/rapids"
    assert redact("https://u:p@harbor.example:443/x") == "https://***@harbor.example:443/x"
    assert redact("https://host/simple?private_token=abc") == "https://host/simple?private_token=***"
    assert redact("https://host/simple?Zq900000=") == "https://host/simple?***"  # found by hypothesis: a bare key


def test_the_reported_case_from_the_cli_is_masked():
    """ci.generate --registry 'localhost:5000@u:PASSWORD/x' printed u:PASSWORD in its error."""
    proc = subprocess.run(["invoke", "ci.generate", "--profile", "local", "--registry", "localhost:5000@u:hunter2-s3cret/x"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "carries credentials" in proc.stderr, proc.stderr
    assert "hunter2" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr


def test_scrub_hides_every_form_of_a_secret_in_a_log_line():
    from rapidship.redact import scrub

    url = "https://bot:p%40ss-w0rd@mirror.example/simple?private_token=glpat-abcdefgh"
    line = (f"Looking in indexes: {url}\n  WARNING: 401 for https://mirror.example/simple/dask/?private_token="
            "glpat-abcdefgh (password p@ss-w0rd)\n")
    out = scrub(line, [url])
    assert "glpat-abcdefgh" not in out and "p%40ss-w0rd" not in out and "p@ss-w0rd" not in out
    assert "https://***@mirror.example/simple?private_token=***" in out
    assert scrub("nothing secret here\n", [url]) == "nothing secret here\n"
