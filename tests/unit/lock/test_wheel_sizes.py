"""locks/<env>/wheel-sizes.json: made from the index's PEP 691/700 file lists, checked against the lock."""

from __future__ import annotations

import hashlib
import json

import pytest

from support.commands import ROOT

from rapidship.errors import ConfigError
from rapidship.lock.sizes import FORMAT, locked_hashes, locked_wheels, read_sizes, record_from_index

LOCK = """# rapidship pip lock
numpy==2.4.6 ; python_full_version < '3.12' \\
    --hash=sha256:{a} \\
    --hash=sha256:{b}
    # via dask
toolz==1.2.0 \\
    --hash=sha256:{c}
""".format(a="a" * 64, b="b" * 64, c="c" * 64)
FILES = {"numpy": [{"filename": "numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl", "hashes": {"sha256": "a" * 64},
                    "size": 17_000_000},
                   {"filename": "numpy-2.4.6-cp311-cp311-manylinux_2_28_aarch64.whl", "hashes": {"sha256": "b" * 64},
                    "size": 15_000_000}],
         "toolz": [{"filename": "toolz-1.2.0-py3-none-any.whl", "hashes": {"sha256": "c" * 64}, "size": 60_789}]}
INSTALLED = {"a" * 64: 57_000_000, "b" * 64: 58_000_000, "c" * 64: 210_687}  # the arm64 wheel holds more


def test_the_record_has_each_distributions_largest_wheel_and_whether_it_is_pure():
    """wheel_bytes and installed_bytes are each the largest over the locked wheels (here of two
    wheels), and the order weighs the installed bytes."""
    record = record_from_index("e", LOCK, FILES, "locks/e/requirements.txt", INSTALLED)
    assert record["distributions"] == {
        "numpy": {"version": "2.4.6", "wheel_bytes": 17_000_000, "installed_bytes": 58_000_000, "pure": False,
                  "wheels": 2, "releases_per_year": 0, "order_bytes": 58_000_000, "order_wheel_bytes": 17_000_000,
                  "order_from": "2.4.6"},
        "toolz": {"version": "1.2.0", "wheel_bytes": 60_789, "installed_bytes": 210_687, "pure": True, "wheels": 1,
                  "releases_per_year": 0, "order_bytes": 210_687, "order_wheel_bytes": 60_789, "order_from": "1.2.0"}}
    assert record["lock_sha256"] == hashlib.sha256(LOCK.encode()).hexdigest() and record["format"] == FORMAT == 2


def test_the_wheels_measured_are_the_locked_ones():
    others = {**FILES, "toolz": FILES["toolz"] + [{"filename": "toolz-1.1.0-py3-none-any.whl", "hashes": {"sha256": "d" * 64}},
                                                  {"filename": "toolz-1.2.0.tar.gz", "hashes": {"sha256": "c" * 64}}]}
    assert [f["hashes"]["sha256"] for f in locked_wheels(LOCK, others)] == ["a" * 64, "b" * 64, "c" * 64]


def test_a_record_made_again_keeps_the_order_figures_of_a_series_it_still_pins():
    """A pin up or down re-records the sizes: numpy's order figures stay those of its series (the plan
    must not move its layer), a new major series is weighed afresh."""
    first = record_from_index("e", LOCK, FILES, "l", INSTALLED)["distributions"]
    first["numpy"] |= {"releases_per_year": 9}  # as the index showed when 2.x was first recorded
    patch = LOCK.replace("numpy==2.4.6", "numpy==2.3.0").replace("toolz==1.2.0", "toolz==2.0.0")
    files = {"numpy": [dict(f, filename=f["filename"].replace("2.4.6", "2.3.0"), size=f["size"] - 900_000)
                       for f in FILES["numpy"]],
             "toolz": [dict(FILES["toolz"][0], filename="toolz-2.0.0-py3-none-any.whl", size=70_000)]}
    installed = {"a" * 64: 50_000_000, "b" * 64: 51_000_000, "c" * 64: 250_000}
    again = record_from_index("e", patch, files, "l", installed, first)["distributions"]
    assert again["numpy"]["wheel_bytes"] == 16_100_000   # the record still says what this lock ships
    assert again["numpy"]["installed_bytes"] == 51_000_000
    assert {k: again["numpy"][k] for k in ("releases_per_year", "order_bytes", "order_from")} == \
        {"releases_per_year": 9, "order_bytes": 58_000_000, "order_from": "2.4.6"}
    assert again["toolz"]["order_bytes"] == 250_000 and again["toolz"]["order_from"] == "2.0.0"  # toolz 2: a new series


def test_a_locked_file_the_index_does_not_list_or_size_is_refused():
    with pytest.raises(ConfigError) as caught:
        record_from_index("e", LOCK, {**FILES, "toolz": []}, "locks/e/requirements.txt", INSTALLED)
    assert caught.value.where == "locks/e/requirements.txt: toolz==1.2.0" and "c" * 64 in caught.value.problem
    unsized = {**FILES, "toolz": [{k: v for k, v in FILES["toolz"][0].items() if k != "size"}]}
    with pytest.raises(ConfigError, match="serves no file sizes"):
        record_from_index("e", LOCK, unsized, "locks/e/requirements.txt", INSTALLED)


@pytest.mark.parametrize("env", ["dask-cpu", "rapids-pip"])
def test_the_committed_records_are_their_locks(env):
    lock = (ROOT / "locks" / env / "requirements.txt").read_bytes()
    sizes = read_sizes(ROOT / "locks", env, lock)
    assert set(sizes) == set(locked_hashes(lock.decode())) and all(d["wheel_bytes"] > 0 for d in sizes.values())
    assert json.loads((ROOT / "locks" / env / "wheel-sizes.json").read_text())["env"] == env
    assert all(d["installed_bytes"] >= d["wheel_bytes"] and d["order_bytes"] == d["installed_bytes"]
               for d in sizes.values())  # made at this format from these versions: nothing carried yet


def test_a_record_of_the_format_that_weighed_wheels_is_refused_naming_the_command(tmp_path):
    """Format 1's order_bytes were wheel bytes: render must not plan by them as installed bytes."""
    lock = (ROOT / "locks" / "dask-cpu" / "requirements.txt").read_bytes()
    (tmp_path / "dask-cpu").mkdir()
    record = json.loads((ROOT / "locks" / "dask-cpu" / "wheel-sizes.json").read_text())
    (tmp_path / "dask-cpu" / "wheel-sizes.json").write_text(json.dumps(record | {"format": 1}))
    with pytest.raises(ConfigError) as caught:
        read_sizes(tmp_path, "dask-cpu", lock)
    assert caught.value.where.endswith("wheel-sizes.json") and "format 1" in caught.value.problem
    assert "invoke lock-sizes --env dask-cpu" in caught.value.fix
    (tmp_path / "dask-cpu" / "wheel-sizes.json").write_text(json.dumps(record))
    assert read_sizes(tmp_path, "dask-cpu", lock) == record["distributions"]


@pytest.mark.parametrize("format_before, carried", [(FORMAT, True), (1, False)])
def test_a_record_made_again_carries_order_figures_only_from_a_record_of_its_format(tmp_path, monkeypatch,
                                                                                    format_before, carried):
    """Format 1's order_bytes weighed the wheel: a record made again over one weighs installed bytes
    afresh; over one of this format it keeps the series' figures."""
    from rapidship.lock import sizes

    monkeypatch.setattr(sizes, "fetch_files", lambda names, index_url: FILES)
    monkeypatch.setattr(sizes, "installed_sizes", lambda wheels: {f["hashes"]["sha256"]: INSTALLED[f["hashes"]["sha256"]]
                                                                  for f in wheels})
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "requirements.txt").write_text(LOCK)
    before = record_from_index("e", LOCK, FILES, "l", INSTALLED)
    before["distributions"]["numpy"] |= {"order_bytes": 17_000_000, "releases_per_year": 9}
    (tmp_path / "e" / "wheel-sizes.json").write_text(json.dumps(before | {"format": format_before}))
    out = sizes.write_sizes("e", tmp_path / "e" / "requirements.txt", tmp_path)
    numpy = json.loads(out.read_text())["distributions"]["numpy"]
    assert (numpy["order_bytes"], numpy["releases_per_year"]) == ((17_000_000, 9) if carried else (58_000_000, 0))
    assert numpy["installed_bytes"] == 58_000_000
