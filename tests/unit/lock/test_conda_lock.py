"""Conda locks: channel configuration, the lock format, staleness, and install from a local channel.

The solve, the lock, the sha256-verified download and the py-rattler install all run for real
against a channel of real `.conda` packages served on 127.0.0.1 (no conda channel is reachable
here; production solves the same way against the configured mirrors).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support.channel_server import serve
from support.local_channel import TEST_ENV, TEST_VARIANTS, DATA_TEXT, PLACEHOLDER, build_channel

from support.commands import ROOT  # noqa: E402

from rapidship.lock.conda import LockTarget, check_conda_locks, lock_conda, lock_path, solve_specs, stale_reason, targets_for, virtual_packages
from rapidship.errors import ConfigError  # noqa: E402
from rapidship.builder.install_lock import LockInstallError, main as install_main, mirror_url, parse_channels, public_url, read_lock
from rapidship.lock.pip import EnvSpec, load_env_spec  # noqa: E402
from rapidship.config.matrix import Arch, load_matrix, parse_matrix  # noqa: E402
from rapidship.render.dockerfile import lock_sources  # noqa: E402

@pytest.fixture(scope="module")
def channel(tmp_path_factory) -> Path:
    """<root>/rtest: a real channel (noarch + linux-64), indexed by py-rattler."""
    root = tmp_path_factory.mktemp("channel")
    build_channel(root / "rtest", tmp_path_factory.mktemp("pkgwork"))
    return root


@pytest.fixture
def project(tmp_path) -> Path:
    """A throwaway project: variants file, envs/rtest.yaml, locks/ with the real tools lock."""
    (tmp_path / "variants.yaml").write_text(TEST_VARIANTS.format(image="rapidship-test/conda"))
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs/rtest.yaml").write_text(TEST_ENV)
    (tmp_path / "locks").mkdir()
    shutil.copy(ROOT / "locks/tools.txt", tmp_path / "locks/tools.txt")
    return tmp_path


# ---- channel configuration and URLs (pure) ----

def test_channels_are_name_equals_url_or_a_url_ending_in_the_name():
    got = parse_channels(["# mirrors", "", "https://mirror.example/conda/conda-forge/",
                          "rapidsai=https://user:tok@mirror.example/rapids-mirror"])
    assert got == {"conda-forge": "https://mirror.example/conda/conda-forge",
                   "rapidsai": "https://user:tok@mirror.example/rapids-mirror"}


def test_a_channel_entry_that_is_not_a_url_is_refused():
    with pytest.raises(LockInstallError, match="NAME=URL"):
        parse_channels(["conda-forge"])


def test_public_url_drops_user_password_and_token_segments():
    assert public_url("https://bob:s3cret@mirror.example:8443/t/abc-123/conda-forge/") == \
        "https://mirror.example:8443/conda-forge"


def test_mirror_url_rewrites_the_channel_base_and_keeps_subdir_and_file():
    rec = {"channel": "conda-forge", "subdir": "linux-64", "fn": "zlib-1.3-h0.conda",
           "url": "https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3-h0.conda"}
    assert mirror_url(rec, {"conda-forge": "http://m.internal/cf"}) == "http://m.internal/cf/linux-64/zlib-1.3-h0.conda"
    assert mirror_url(rec, {}) == rec["url"]


def test_variant_pins_and_virtual_packages_follow_the_variant():
    spec = EnvSpec(name="rapids", flavour="conda", requirements=("cudf=26.10",), channels=("rapidsai",))
    target = LockTarget(env="rapids", python="3.12", cuda="13.0", arch=Arch.arm64)
    assert solve_specs(spec, target) == ["cudf=26.10", "python 3.12.*", "cuda-version 13.0.*"]
    assert ("__cuda", "13.0", "0") in virtual_packages(target)
    assert ("__archspec", "1", "aarch64") in virtual_packages(target)
    assert target.platform == "linux-aarch64"


def test_the_real_matrix_needs_one_rapids_lock_per_python_cuda_line_and_arch():
    spec = load_env_spec("rapids", ROOT / "envs")
    lines = {(t.line, t.platform) for t in targets_for(spec, load_matrix(ROOT / "variants.yaml"))}
    assert lines == {("py3.11-cuda12.9", "linux-64"), ("py3.11-cuda12.9", "linux-aarch64"),
                     ("py3.12-cuda13.0", "linux-64"), ("py3.12-cuda13.0", "linux-aarch64")}


def test_a_conda_variant_renders_with_its_per_arch_locks_and_the_tools_lock():
    v = load_matrix(ROOT / "variants.yaml").get("cuda13-ubuntu24")
    assert {k: str(p) for k, p in lock_sources(v, Path("locks")).items()} == {
        "conda-amd64.lock": "locks/rapids/py3.12-cuda13.0/conda-amd64.lock",
        "conda-arm64.lock": "locks/rapids/py3.12-cuda13.0/conda-arm64.lock",
        "tools.txt": "locks/tools.txt"}


# ---- solve, lock, staleness, install: real, against the local channel ----

def test_lock_solves_the_local_channel_with_urls_and_sha256_and_no_credentials(channel, project, tmp_path):
    matrix = load_matrix(project / "variants.yaml")
    spec = load_env_spec("rtest", project / "envs")
    served = tmp_path / "served"  # the channel also under /t/<token>/, as anaconda.org-style mirrors serve it
    (served / "t/tok-999").mkdir(parents=True)
    (served / "t/tok-999/rtest").symlink_to(channel / "rtest")
    with serve(served) as (port, _):
        paths = lock_conda(spec, matrix, [f"http://alice:hunter2@127.0.0.1:{port}/t/tok-999/rtest"], project / "locks")
    assert paths == [project / "locks/rtest/py3.11-cpu/conda-amd64.lock"]
    text = paths[0].read_text()
    header, records = read_lock(text)
    assert header["platform"] == "linux-64"
    assert [r["name"] for r in records] == ["rtest-data", "rtest-hello"]  # the dependency came along
    for rec in records:
        pkg = channel / "rtest" / rec["subdir"] / rec["fn"]
        assert rec["sha256"] == __import__("hashlib").sha256(pkg.read_bytes()).hexdigest()
        assert rec["url"] == f"http://127.0.0.1:{port}/rtest/{rec['subdir']}/{rec['fn']}"
    for secret in ("alice", "hunter2", "tok-999"):
        assert secret not in text
    assert check_conda_locks(spec, matrix, project / "locks") == paths


def test_a_lock_that_no_longer_matches_its_spec_is_reported(channel, project):
    matrix = load_matrix(project / "variants.yaml")
    spec = load_env_spec("rtest", project / "envs")
    with serve(channel) as (port, _):
        lock_conda(spec, matrix, [f"http://127.0.0.1:{port}/rtest"], project / "locks")
    (project / "envs/rtest.yaml").write_text(TEST_ENV.replace("rtest-hello 1.0.*", "rtest-hello >=1.0"))
    changed = load_env_spec("rtest", project / "envs")
    with pytest.raises(ConfigError, match="lock does not match its spec"):
        check_conda_locks(changed, matrix, project / "locks")
    target = targets_for(changed, matrix)[0]
    assert stale_reason(changed, target, None, Path("x.lock")) == "x.lock does not exist"
    assert "not a rapidship conda lock" in stale_reason(changed, target, "# nothing\n", Path("x.lock"))


def test_invoke_lock_check_reports_the_missing_rapids_conda_locks():
    """The real RAPIDS conda env has no lock here (no conda channel is reachable): --check says so."""
    proc = subprocess.run(["invoke", "lock", "--check", "--env", "rapids"], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 2
    assert "locks/rapids/py3.11-cuda12.9/conda-amd64.lock" in proc.stderr and "invoke lock --env rapids" in proc.stderr


def test_an_unreachable_channel_is_one_clear_error(project):
    matrix = load_matrix(project / "variants.yaml")
    spec = load_env_spec("rtest", project / "envs")
    with pytest.raises(ConfigError, match=r"cannot be solved from rtest \(http://127.0.0.1:9/rtest\)"):
        lock_conda(spec, matrix, ["http://127.0.0.1:9/rtest"], project / "locks")


@pytest.fixture
def short_dir():
    """pytest's tmp paths can be longer than the packages' placeholder; the builder's prefix never is."""
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="rs-"))
    yield short
    shutil.rmtree(short, ignore_errors=True)


def _lock(channel: Path, project: Path) -> Path:
    matrix = load_matrix(project / "variants.yaml")
    spec = load_env_spec("rtest", project / "envs")
    with serve(channel) as (port, _):
        return lock_conda(spec, matrix, [f"http://127.0.0.1:{port}/rtest"], project / "locks")[0]


def test_install_fetches_from_the_mirror_verifies_and_links_exactly_the_lock(channel, project, tmp_path, short_dir):
    lock = _lock(channel, project)  # locked against one server (its URLs carry that port)...
    mirror = tmp_path / "mirror"
    shutil.copytree(channel, mirror)
    secret = tmp_path / "channels"
    prefix = short_dir / "prefix"  # shorter than the packages' placeholder, as in the builder
    with serve(mirror, user="builder", password="pa55") as (port, seen):  # ...installed from another
        secret.write_text(f"http://builder:pa55@127.0.0.1:{port}/rtest\n")
        assert install_main(["--lock", str(lock), "--prefix", str(prefix), "--channels-secret", str(secret),
                             "--cache", str(tmp_path / "cache")]) == 0
    assert sorted(seen) == ["/rtest/linux-64/rtest-hello-1.0-h0_0.conda", "/rtest/noarch/rtest-data-1.0-0.conda"]
    out = subprocess.run([str(prefix / "bin/rtest-greet")], capture_output=True, text=True, check=True).stdout
    assert f"data-path={prefix}/share/rtest/data.txt" in out and DATA_TEXT.strip() in out
    metas = [json.loads(p.read_text()) for p in (prefix / "conda-meta").glob("*.json")]
    assert sorted(m["url"].split("/rtest/")[1] for m in metas) == ["linux-64/rtest-hello-1.0-h0_0.conda",
                                                                   "noarch/rtest-data-1.0-0.conda"]
    assert not any("pa55" in json.dumps(m) for m in metas)


def test_install_refuses_a_package_whose_sha256_differs_from_the_lock(channel, project, tmp_path, capsys):
    lock = _lock(channel, project)
    mirror = tmp_path / "mirror"
    shutil.copytree(channel, mirror)
    tampered = mirror / "rtest/linux-64/rtest-hello-1.0-h0_0.conda"
    tampered.write_bytes(tampered.read_bytes() + b"\0")
    prefix = tmp_path / "prefix"
    with serve(mirror) as (port, _):
        (tmp_path / "channels").write_text(f"rtest=http://127.0.0.1:{port}/rtest\n")
        code = install_main(["--lock", str(lock), "--prefix", str(prefix), "--channels-secret",
                             str(tmp_path / "channels"), "--cache", str(tmp_path / "cache")])
    assert code == 2
    assert "rtest-hello-1.0-h0_0.conda: sha256 mismatch" in capsys.readouterr().err
    assert not (prefix / "bin/rtest-hello").exists()
    assert not list((tmp_path / "cache/downloads").glob("*rtest-hello*"))  # nothing unverified is kept


def test_a_prefix_longer_than_the_packages_placeholder_is_one_clear_error(channel, project, tmp_path, capsys):
    lock = _lock(channel, project)
    prefix = tmp_path / ("p" * (len(PLACEHOLDER) + 1))
    with serve(channel) as (port, _):
        (tmp_path / "channels").write_text(f"http://127.0.0.1:{port}/rtest\n")
        code = install_main(["--lock", str(lock), "--prefix", str(prefix), "--channels-secret",
                             str(tmp_path / "channels"), "--cache", str(tmp_path / "cache")])
    assert code == 2
    assert "py-rattler could not link the env" in capsys.readouterr().err


def test_conda_pack_relocates_text_binary_and_shebang_prefixes(channel, project, tmp_path, short_dir):
    """The builder's pack step on the host: every prefix becomes /opt/rapids, no build prefix is left."""
    lock = _lock(channel, project)
    prefix = short_dir / ("build-prefix-" + "y" * 30)
    with serve(channel) as (port, _):
        (tmp_path / "channels").write_text(f"http://127.0.0.1:{port}/rtest\n")
        assert install_main(["--lock", str(lock), "--prefix", str(prefix), "--channels-secret",
                             str(tmp_path / "channels"), "--cache", str(tmp_path / "cache")]) == 0
    packed = tmp_path / "env.tar"
    subprocess.run(["conda-pack", "--prefix", str(prefix), "--dest-prefix", "/opt/rapids", "--compress-level", "0",
                    "--output", str(packed), "--quiet", "--exclude", "include/*", "--exclude", "*.a"], check=True)
    import tarfile

    with tarfile.open(packed) as tar:
        names = set(tar.getnames())
        contents = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert "include/rtest.h" not in names and "lib/librtest.a" not in names
    assert contents["bin/rtest-greet"].startswith(b"#!/opt/rapids/bin/rtest-hello\n")
    assert contents["etc/rtest/rtest.conf"] == b"data=/opt/rapids/share/rtest/data.txt\n"
    assert b"/opt/rapids/share/rtest/data.txt\0" in contents["bin/rtest-hello"]
    for name, data in contents.items():
        assert str(prefix).encode() not in data, name
        if not name.startswith("conda-meta/"):
            assert PLACEHOLDER.encode() not in data, name


def test_conda_specs_reject_bad_channels_and_pins(tmp_path):
    (tmp_path / "bad.yaml").write_text("flavour: conda\nchannels: [https://x/y]\nrequirements: [a]\n")
    with pytest.raises(ConfigError, match="channel names"):
        load_env_spec("bad", tmp_path)
    (tmp_path / "bad.yaml").write_text("flavour: conda\nchannels: [x]\npin: [numpy]\nrequirements: [a]\n")
    with pytest.raises(ConfigError, match="pin"):
        load_env_spec("bad", tmp_path)
    (tmp_path / "bad.yaml").write_text("flavour: conda\nchannels: [x]\nomit: [a]\nrequirements: [a]\n")
    with pytest.raises(ConfigError, match="only pip envs"):
        load_env_spec("bad", tmp_path)


def test_parse_matrix_accepts_the_test_variants_file():
    m = parse_matrix(TEST_VARIANTS.format(image="rapidship-test/conda"), "test")
    assert m.get("cpu-debian12").flavour.value == "conda"
    assert lock_path(LockTarget("rtest", "3.11", None, Arch.amd64), Path("l")) == Path("l/rtest/py3.11-cpu/conda-amd64.lock")


# ---- the solver in its own process ----

def _answers_then_crashes_at_exit(value):
    import atexit
    import os

    atexit.register(os.abort)   # what py-rattler's threads did at interpreter exit, now and then
    return value * 2


def _dies_before_answering():
    import os

    os._exit(139)


def _refuses():
    from rapidship.errors import ConfigError

    raise ConfigError("envs/rapids.yaml (py3.11, linux-64)", "cannot be solved", "check the channel mirrors (--conda-channel)")


def test_a_solver_that_crashes_at_exit_after_answering_changes_nothing():
    from rapidship.lock.conda import isolated

    assert isolated(_answers_then_crashes_at_exit, 21, what="envs/x.yaml") == 42


def test_a_solver_error_arrives_whole_and_a_dead_solver_is_one_error():
    from rapidship.errors import ConfigError, RapidshipError
    from rapidship.lock.conda import isolated

    with pytest.raises(ConfigError) as err:
        isolated(_refuses, what="envs/rapids.yaml")
    assert err.value.where == "envs/rapids.yaml (py3.11, linux-64)" and "--conda-channel" in err.value.fix
    with pytest.raises(RapidshipError) as err:
        isolated(_dies_before_answering, what="envs/rapids.yaml (py3.11, linux-64)")
    assert err.value.where == "envs/rapids.yaml (py3.11, linux-64)" and "died before it answered" in err.value.problem
    assert "139" in err.value.problem
