"""`invoke reproduce`'s pure parts: what of the recorded inputs is missing here, and two images
compared field by field and file by file."""

from __future__ import annotations

from rapidship.imagebuild.reproduce import FileFacts, Listing, base_args, differences, input_problems
from rapidship.records import BaseInputs, BaseRecord, BuiltImage

REV = "e78a87c8a2e13c477693a4a21e15a44fa0db0b04"
BASE = {"ref": "debian:bookworm-slim", "id": "sha256:" + "1" * 64}


def _record(**extra) -> BuiltImage:
    return BuiltImage(variant="cpu-debian12", arch="amd64", ref="r", image_id="sha256:" + "a" * 64, size_bytes=1,
                      zstd_bytes=1, layers=1, seconds=1.0, lock_sha256="3fc9" + "0" * 60, base="b", log="l",
                      extra={"revision": REV, "source_date_epoch": 1796000000, "bases": {"RUNTIME_BASE": BASE}, **extra})


def test_the_recorded_inputs_all_present_is_no_problem():
    assert input_problems(_record(), REV, False, "3fc9" + "0" * 60) == []
    assert base_args(_record(), {}, {"RUNTIME_BASE": BASE["id"]}) == ({"RUNTIME_BASE": BASE["ref"]}, [])


def test_each_missing_input_is_named_with_what_to_do():
    problems = input_problems(_record(), "f" * 40, False, "9999" + "0" * 60)
    assert problems[0] == "the image was built from commit e78a87c8a2e1, this checkout is at ffffffffffff: git checkout e78a87c8a2e1"
    assert "the lock renders to 999900000000 here, the image was built from 3fc900000000" in problems[1]
    _, base = base_args(_record(), {}, {"RUNTIME_BASE": "sha256:" + "2" * 64})
    assert "RUNTIME_BASE debian:bookworm-slim is sha256:222222222222" in base[0] and "load that base" in base[0]
    assert input_problems(_record(), REV, True, "3fc9" + "0" * 60) == [
        "this checkout has uncommitted changes to tracked files: commit or stash them"]
    assert "not in the engine" in base_args(_record(), {}, {})[1][0]


INPUTS = {"tool": "mmdebstrap 1.3.5", "distro": "debian", "suite": "bookworm", "mirror": "http://deb.debian.org/debian",
          "include": [], "archive_date": "Sat, 11 Jul 2026 10:16:37 UTC", "archive": {},
          "packages": {"bash": "5.2.15-2+b13", "libc6": "2.36-9+deb12u9", "tzdata": "2025b-0+deb12u1"}}


def _made_here(image_id: str, **packages) -> BaseRecord:
    inputs = BaseInputs(**{**INPUTS, "archive_date": "Mon, 01 Mar 2027 08:00:00 UTC",
                           "packages": {k: v for k, v in {**INPUTS["packages"], **packages}.items() if v}})
    return BaseRecord(name="debian:bookworm-slim", arch="amd64", ref="debian:bookworm-slim-amd64-run2",
                      image_id=image_id, source_date_epoch=946684800, seconds=20.0, rootfs_bytes=1, inputs=inputs)


def test_a_base_made_here_with_the_recorded_id_is_taken_by_its_own_name():
    """Another clone, another run: its own base, rebuilt to the same id, is the input (not the name
    the first run's engine gave it)."""
    recorded = _record(bases={"RUNTIME_BASE": {**BASE, "ref": "debian:bookworm-slim-amd64-run1", "inputs": INPUTS}})
    here = {"RUNTIME_BASE": _made_here(BASE["id"])}
    assert base_args(recorded, here, {}) == ({"RUNTIME_BASE": "debian:bookworm-slim-amd64-run2"}, [])


def test_a_base_from_an_archive_that_moved_on_names_the_package_versions_that_differ():
    recorded = _record(bases={"RUNTIME_BASE": {**BASE, "inputs": INPUTS}})
    here = {"RUNTIME_BASE": _made_here("sha256:" + "3" * 64, libc6="2.36-9+deb12u10", tzdata=None)}
    args, problems = base_args(recorded, here, {"RUNTIME_BASE": "sha256:" + "3" * 64})
    assert args == {} and len(problems) == 1
    assert problems[0].startswith("RUNTIME_BASE: this run's base debian:bookworm-slim-amd64-run2 is sha256:333333333333, "
                                  "the image was built on sha256:111111111111: the archive has moved on since Sat, 11 "
                                  "Jul 2026 10:16:37 UTC (2 package versions differ: ")
    assert "libc6 2.36-9+deb12u9 then, 2.36-9+deb12u10 now; tzdata 2025b-0+deb12u1 then, (absent) now" in problems[0]
    same = _made_here("sha256:" + "3" * 64)  # same packages, another mirror
    other = base_args(_record(bases={"RUNTIME_BASE": {**BASE, "inputs": {**INPUTS, "mirror": "http://m.example/debian"}}}),
                      {"RUNTIME_BASE": same}, {})[1][0]
    assert "the same package versions, made otherwise: mirror 'http://m.example/debian' then" in other
    assert "names no inputs of its base" in base_args(_record(), {"RUNTIME_BASE": same}, {})[1][0]


def test_a_record_from_before_reproducible_builds_says_so():
    old = _record()
    old = old.model_copy(update={"extra": {"bases": {}}})
    assert "names no source revision and SOURCE_DATE_EPOCH" in input_problems(old, REV, False, "x")[0]


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
