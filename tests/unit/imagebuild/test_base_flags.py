"""invoke base records how a base was made, and says why debootstrap stopped."""

from __future__ import annotations

from support.commands import ROOT

from rapidship.config.matrix import Arch, load_matrix
from rapidship.imagebuild.base import differences, log_cause, made_from, plan_base

M = load_matrix(ROOT / "variants.yaml")


def test_a_base_made_from_another_mirror_differs_and_says_how():
    plan = plan_base(M, "debian12", Arch("amd64"), None)
    assert differences(plan, made_from(plan)) == []
    other = plan_base(M, "debian12", Arch("amd64"), "http://mirror.example/debian")
    assert differences(other, made_from(plan)) == [
        "mirror 'http://deb.debian.org/debian', the flags say 'http://mirror.example/debian'"]
    assert differences(plan, None)[0].startswith("mirror '(not recorded)'")  # a base from before: unknown


def test_a_mirror_token_is_not_written_into_the_label():
    plan = plan_base(M, "debian12", Arch("amd64"), "https://bot:s3cret-tok@mirror.example/debian")
    assert "s3cret" not in str(made_from(plan))


def test_the_cause_of_a_failed_debootstrap_is_in_the_message(tmp_path):
    log = tmp_path / "base.log"
    log.write_text("I: Retrieving InRelease\nI: Retrieving Release\n"
                   "E: Failed getting release file http://nowhere.invalid/debian/dists/bookworm/Release\n")
    assert log_cause(log) == "E: Failed getting release file http://nowhere.invalid/debian/dists/bookworm/Release"
    log.write_text("all fine\n")
    assert log_cause(log) == ""


def test_a_foreign_base_without_arch_test_says_what_to_install(tmp_path, monkeypatch):
    """mmdebstrap refuses a foreign arch without arch-test: said before anything is mounted or run."""
    import pytest

    from rapidship.errors import ConfigError
    from rapidship.imagebuild.base import enable_emulation, host_arch

    monkeypatch.setenv("PATH", str(tmp_path))  # a machine with none of the tools
    foreign = Arch("arm64" if host_arch() == "amd64" else "amd64")
    with pytest.raises(ConfigError) as caught:
        enable_emulation(foreign)
    assert caught.value.where == "--arch" and "needs arch-test" in caught.value.problem
    assert caught.value.fix == "apt-get install arch-test qemu-user-static binfmt-support"


def test_an_apt_source_beside_the_mirror_is_a_difference_reaches_mmdebstrap_and_hides_its_token():
    from rapidship.imagebuild.base import mmdebstrap_command

    plain = plan_base(M, "debian12", Arch("amd64"), None)
    local = "deb [trusted=yes] http://site:t0ken@127.0.0.1:8000/ ./"
    plan = plan_base(M, "debian12", Arch("amd64"), None, sources=(local,))
    assert mmdebstrap_command(plan, ROOT / "r.tar", ROOT / "f")[-2:] == ["http://deb.debian.org/debian", local]
    assert differences(plan, made_from(plain)) and differences(plain, made_from(plain)) == []
    assert differences(plain, {k: v for k, v in made_from(plain).items() if not k.endswith("sources")}) == []  # a base from before
    assert "t0ken" not in str(made_from(plan))


def test_an_apt_source_that_is_not_one_sources_line_is_refused_naming_the_flag():
    import pytest

    from rapidship.errors import ConfigError
    for bad in ("http://127.0.0.1:8000/", "deb http://x", "deb-src http://x bookworm main", "deb [trusted=yes http://x ./"):
        with pytest.raises(ConfigError, match="--apt-source"):
            plan_base(M, "debian12", Arch("amd64"), None, sources=(bad,))
