"""`invoke reproduce`'s pure parts: what of the recorded inputs is missing here, and two images
compared field by field and file by file."""

from __future__ import annotations

from rapidship.imagebuild.reproduce import FileFacts, Listing, differences, input_problems
from rapidship.records import BuiltImage

REV = "e78a87c8a2e13c477693a4a21e15a44fa0db0b04"
BASE = {"ref": "debian:bookworm-slim", "id": "sha256:" + "1" * 64}


def _record(**extra) -> BuiltImage:
    return BuiltImage(variant="cpu-debian12", arch="amd64", ref="r", image_id="sha256:" + "a" * 64, size_bytes=1,
                      zstd_bytes=1, layers=1, seconds=1.0, lock_sha256="3fc9" + "0" * 60, base="b", log="l",
                      extra={"revision": REV, "source_date_epoch": 1796000000, "bases": {"RUNTIME_BASE": BASE}, **extra})


def test_the_recorded_inputs_all_present_is_no_problem():
    assert input_problems(_record(), REV, False, "3fc9" + "0" * 60, {"RUNTIME_BASE": BASE["id"]}) == []


def test_each_missing_input_is_named_with_what_to_do():
    problems = input_problems(_record(), "f" * 40, False, "9999" + "0" * 60, {"RUNTIME_BASE": "sha256:" + "2" * 64})
    assert problems[0] == "the image was built from commit e78a87c8a2e1, this checkout is at ffffffffffff: git checkout e78a87c8a2e1"
    assert "the lock renders to 999900000000 here, the image was built from 3fc900000000" in problems[1]
    assert "RUNTIME_BASE debian:bookworm-slim is sha256:222222222222" in problems[2] and "load that base" in problems[2]
    assert input_problems(_record(), REV, True, "3fc9" + "0" * 60, {"RUNTIME_BASE": BASE["id"]}) == [
        "this checkout has uncommitted changes to tracked files: commit or stash them"]
    assert "not in the engine" in input_problems(_record(), REV, False, "3fc9" + "0" * 60, {})[0]


def test_a_record_from_before_reproducible_builds_says_so():
    old = _record()
    old = old.model_copy(update={"extra": {"bases": {}}})
    assert "names no source revision and SOURCE_DATE_EPOCH" in input_problems(old, REV, False, "x", {})[0]


def _facts(**changes) -> FileFacts:
    base = dict(kind="0", mode="0644", owner="0:0", size=3, sha256="ab" * 32, link="", mtime=1796000000, xattrs="")
    return FileFacts(**{**base, **changes})


def test_differences_name_each_config_field_and_file():
    shipped = Listing({"created": "2026-11-30T00:53:20Z", "config": {"Labels": {"rev": "a"}},
                       "rootfs": {"diff_ids": ["x"]}},
                      [{"etc/shadow": _facts(), "etc/passwd": _facts(), "opt/gone": _facts()}], ["RUN useradd"])
    rebuilt = Listing({"created": "2026-11-30T00:53:20Z", "config": {"Labels": {"rev": "b"}},
                       "rootfs": {"diff_ids": ["y"]}},
                      [{"etc/shadow": _facts(sha256="cd" * 32), "etc/passwd": _facts(mode="0600", mtime=1),
                        "opt/new": _facts()}], ["RUN useradd"])
    assert differences(shipped, rebuilt) == [
        "config config.Labels.rev: 'a' shipped, 'b' rebuilt",
        "layer 1 (RUN useradd) /etc/passwd: mode '0644' shipped, '0600' rebuilt; mtime 1796000000 shipped, 1 rebuilt",
        "layer 1 (RUN useradd) /etc/shadow: content differs",
        "layer 1 (RUN useradd) /opt/gone: only in the shipped image",
        "layer 1 (RUN useradd) /opt/new: only in the rebuilt image",
    ]
    assert differences(shipped, shipped) == []
    # another epoch changes every mtime: said once per layer, so the files that really differ stay in view
    later = Listing(shipped.config, [{k: _facts(mtime=1797000000, sha256=v.sha256 if k != "etc/shadow" else "ee" * 32)
                                      for k, v in shipped.layers[0].items()}], shipped.steps)
    assert differences(shipped, later) == ["layer 1 (RUN useradd) /etc/shadow: content differs; mtime 1796000000 "
                                           "shipped, 1797000000 rebuilt",
                                           "layer 1 (RUN useradd): mtimes differ (1796000000 shipped, 1797000000 rebuilt)"]
    many = Listing({}, [{f"f{i}": _facts() for i in range(100)}], [])
    assert differences(many, Listing({}, [{}], []), limit=5)[-1] == "... and 95 more"
