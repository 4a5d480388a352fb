"""Env specs and pip locks: committed locks match their specs; drift and bad specs are reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from rapidship.errors import ConfigError
from rapidship.lock.pip import check_lock, load_env_spec, stale_reason

from support.commands import ROOT  # noqa: E402


def test_committed_pip_lock_matches_its_spec():
    spec = load_env_spec("dask-cpu", ROOT / "envs")
    check_lock(spec, ROOT / "locks")  # raises when stale
    text = (ROOT / "locks" / "dask-cpu" / "requirements.txt").read_text()
    assert "--hash=sha256:" in text and "distributed==2026.8.0" in text


def test_a_changed_spec_makes_the_lock_stale(tmp_path):
    envs = tmp_path / "envs"
    envs.mkdir()
    (envs / "x.yaml").write_text('flavour: pip\npython: "3.11"\nrequirements: [dask==2026.8.0]\n')
    spec = load_env_spec("x", envs)
    lock = f"# spec-sha256: {spec.digest}\n"
    assert stale_reason(spec, lock, Path("l")) is None
    (envs / "x.yaml").write_text('flavour: pip\npython: "3.11"\nrequirements: [dask==2026.9.0]\n')
    changed = load_env_spec("x", envs)
    assert "another version" in stale_reason(changed, lock, Path("l"))
    assert "does not exist" in stale_reason(changed, None, Path("l"))
    assert "no spec-sha256" in stale_reason(changed, "dask==1\n", Path("l"))
    locks = tmp_path / "locks"
    (locks / "x").mkdir(parents=True)
    (locks / "x" / "requirements.txt").write_text(lock)
    with pytest.raises(ConfigError, match="invoke lock --env x"):
        check_lock(changed, locks)


@pytest.mark.parametrize("body,words", [
    ("flavour: npm\nrequirements: [a]\n", "is not pip or conda"),
    ("flavour: pip\nrequirements: []\n", "non-empty list"),
    ("flavour: pip\npython: 3.10\nrequirements: [a]\n", "quoted version"),
    ("flavour: pip\nrequirement: [a]\n", "unknown key"),
    ("- just a list\n", "must be a mapping"),
])
def test_bad_env_specs(tmp_path, body, words):
    (tmp_path / "bad.yaml").write_text(body)
    with pytest.raises(ConfigError, match=words):
        load_env_spec("bad", tmp_path)
