"""locks/<env>/wheel-sizes.json: made from the index's PEP 691/700 file lists, checked against the lock."""

from __future__ import annotations

import hashlib
import json

import pytest

from support.commands import ROOT

from rapidship.errors import ConfigError
from rapidship.lock.sizes import locked_hashes, read_sizes, record_from_index

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


def test_the_record_has_each_distributions_largest_wheel_and_whether_it_is_pure():
    record = record_from_index("e", LOCK, FILES, "locks/e/requirements.txt")
    assert record["distributions"] == {
        "numpy": {"version": "2.4.6", "wheel_bytes": 17_000_000, "pure": False, "wheels": 2, "releases_per_year": 0,
                  "order_bytes": 17_000_000, "order_from": "2.4.6"},
        "toolz": {"version": "1.2.0", "wheel_bytes": 60_789, "pure": True, "wheels": 1, "releases_per_year": 0,
                  "order_bytes": 60_789, "order_from": "1.2.0"}}
    assert record["lock_sha256"] == hashlib.sha256(LOCK.encode()).hexdigest()


def test_a_record_made_again_keeps_the_order_figures_of_a_series_it_still_pins():
    """A pin up or down re-records the sizes: numpy's order figures stay those of its series (the plan
    must not move its layer), a new major series is weighed afresh."""
    first = record_from_index("e", LOCK, FILES, "l")["distributions"]
    first["numpy"] |= {"releases_per_year": 9}  # as the index showed when 2.x was first recorded
    patch = LOCK.replace("numpy==2.4.6", "numpy==2.3.0").replace("toolz==1.2.0", "toolz==2.0.0")
    files = {"numpy": [dict(f, filename=f["filename"].replace("2.4.6", "2.3.0"), size=f["size"] - 900_000)
                       for f in FILES["numpy"]],
             "toolz": [dict(FILES["toolz"][0], filename="toolz-2.0.0-py3-none-any.whl", size=70_000)]}
    again = record_from_index("e", patch, files, "l", first)["distributions"]
    assert again["numpy"]["wheel_bytes"] == 16_100_000   # the record still says what this lock ships
    assert {k: again["numpy"][k] for k in ("releases_per_year", "order_bytes", "order_from")} == \
        {"releases_per_year": 9, "order_bytes": 17_000_000, "order_from": "2.4.6"}
    assert again["toolz"]["order_bytes"] == 70_000 and again["toolz"]["order_from"] == "2.0.0"  # toolz 2: a new series


def test_a_locked_file_the_index_does_not_list_or_size_is_refused():
    with pytest.raises(ConfigError) as caught:
        record_from_index("e", LOCK, {**FILES, "toolz": []}, "locks/e/requirements.txt")
    assert caught.value.where == "locks/e/requirements.txt: toolz==1.2.0" and "c" * 64 in caught.value.problem
    unsized = {**FILES, "toolz": [{k: v for k, v in FILES["toolz"][0].items() if k != "size"}]}
    with pytest.raises(ConfigError, match="serves no file sizes"):
        record_from_index("e", LOCK, unsized, "locks/e/requirements.txt")


@pytest.mark.parametrize("env", ["dask-cpu", "rapids-pip"])
def test_the_committed_records_are_their_locks(env):
    lock = (ROOT / "locks" / env / "requirements.txt").read_bytes()
    sizes = read_sizes(ROOT / "locks", env, lock)
    assert set(sizes) == set(locked_hashes(lock.decode())) and all(d["wheel_bytes"] > 0 for d in sizes.values())
    assert json.loads((ROOT / "locks" / env / "wheel-sizes.json").read_text())["env"] == env
