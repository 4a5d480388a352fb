"""The workspace: record paths, atomic writes, validated reads with one clear error each."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rapidship.imagebuild.buildkit import BuiltImage, read_record, write_record
from rapidship.records import SCHEMA_VERSION, RecordError, Workspace, load, save

from support.commands import ROOT  # noqa: E402
BUILT = BuiltImage(variant="cpu-debian12", arch="amd64", ref="rapidship/dask:x", image_id="sha256:ab", size_bytes=10,
                   zstd_bytes=5, layers=3, seconds=1.5, lock_sha256="00", base="debian", log="build.log")


def test_every_record_has_one_path_under_the_root(tmp_path):
    ws = Workspace(tmp_path)
    assert ws.build("v", "amd64") == tmp_path / "v" / "build-amd64.json"
    assert ws.gates("v", "arm64") == tmp_path / "v" / "gates-arm64.json"
    assert ws.decision("v", "amd64") == tmp_path / "v" / "scan-amd64" / "decision.json"
    assert ws.push("v") == tmp_path / "v" / "push.json" and ws.promote("v") == tmp_path / "v" / "promote.json"
    assert ws.size("v", "amd64").name == "size-amd64.json" and ws.staged("v", "amd64").name == "staged-amd64.json"


def test_round_trip_adds_the_schema_version(tmp_path):
    ws = Workspace(tmp_path)
    path = write_record(ws, BUILT)
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION
    assert read_record(ws, "cpu-debian12", "amd64") == BUILT


def test_a_missing_record_names_the_file_and_the_command(tmp_path):
    with pytest.raises(RecordError) as err:
        read_record(Workspace(tmp_path), "cpu-debian12", "arm64")
    assert err.value.where == str(tmp_path / "cpu-debian12" / "build-arm64.json")
    assert "no record" in err.value.problem
    assert "invoke build --variant cpu-debian12 --arch arm64" in err.value.fix


@pytest.mark.parametrize("text,problem", [
    ("{", "corrupt record: not JSON"),
    ("[]", "not a JSON object"),
    ('{"schema_version": 99}', "schema 99, newer than this rapidship reads"),
    ('{"schema_version": "1"}', "schema_version '1'"),
    ('{"variant": "cpu-debian12"}', "of another shape"),
])
def test_bad_records_give_one_clear_error(tmp_path, text, problem):
    ws = Workspace(tmp_path)
    ws.build("cpu-debian12", "amd64").parent.mkdir(parents=True)
    ws.build("cpu-debian12", "amd64").write_text(text)
    with pytest.raises(RecordError) as err:
        read_record(ws, "cpu-debian12", "amd64")
    assert problem in err.value.problem
    assert "invoke build --variant cpu-debian12 --arch amd64" in err.value.fix


def test_types_are_strict_a_string_is_not_a_number(tmp_path):
    ws = Workspace(tmp_path)
    doc = json.loads(write_record(ws, BUILT).read_text()) | {"size_bytes": "10"}
    ws.build("cpu-debian12", "amd64").write_text(json.dumps(doc))
    with pytest.raises(RecordError, match="size_bytes"):
        read_record(ws, "cpu-debian12", "amd64")


def test_records_from_before_versioning_still_read(tmp_path):
    ws = Workspace(tmp_path)
    doc = json.loads(write_record(ws, BUILT).read_text())
    del doc["schema_version"]
    ws.build("cpu-debian12", "amd64").write_text(json.dumps(doc))
    assert read_record(ws, "cpu-debian12", "amd64") == BUILT


def test_a_failed_write_leaves_the_old_record_and_no_temp_file(tmp_path):
    ws = Workspace(tmp_path)
    path = write_record(ws, BUILT)
    with pytest.raises(TypeError):
        save(path, object())  # not a record: nothing is written
    assert read_record(ws, "cpu-debian12", "amd64") == BUILT
    assert sorted(p.name for p in path.parent.iterdir()) == ["build-amd64.json"]


def test_concurrent_writers_never_leave_half_a_record(tmp_path):
    # Two processes rewriting the same record 200 times each while this one reads it: every read
    # is a whole record (temp file + rename), never a torn one.
    ws = Workspace(tmp_path)
    write_record(ws, BUILT)
    code = ("import sys; sys.path.insert(0, 'src'); from rapidship.imagebuild.buildkit import BuiltImage, write_record; "
            "from rapidship.records import Workspace; "
            f"b = BuiltImage(**{json.dumps(BUILT.__dict__)}); ws = Workspace({str(tmp_path)!r}); "
            "[write_record(ws, b.model_copy(update={'layers': i})) for i in range(200)]")
    writers = [subprocess.Popen(["python3", "-c", code], cwd=ROOT) for _ in range(2)]
    seen = 0
    while any(w.poll() is None for w in writers):
        assert read_record(ws, "cpu-debian12", "amd64").variant == "cpu-debian12"
        seen += 1
    assert all(w.returncode == 0 for w in writers) and seen > 0
    assert [p.name for p in (tmp_path / "cpu-debian12").iterdir()] == ["build-amd64.json"]


@settings(max_examples=150, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
                    max_leaves=20))
def test_any_json_document_is_a_record_or_one_record_error(tmp_path_factory, doc):
    path = tmp_path_factory.mktemp("r") / "build-amd64.json"
    path.write_text(json.dumps(doc))
    try:
        assert isinstance(load(path, BuiltImage, "invoke build"), BuiltImage)
    except RecordError as err:
        assert err.where == str(path) and err.fix


def test_the_record_paths_are_what_the_ci_jobs_publish():
    from rapidship.ci.pipeline import WS, local, pipeline
    from rapidship.config.matrix import load_matrix

    doc = pipeline(load_matrix(ROOT / "variants.yaml"), local(), ["cpu-debian12"])
    paths = {p for job in doc.values() if isinstance(job, dict) for p in job.get("artifacts", {}).get("paths", [])}
    assert {os.fspath(WS.gates("cpu-debian12", "amd64")), os.fspath(WS.push("cpu-debian12")),
            os.fspath(WS.build("cpu-debian12", "amd64"))} <= paths
    assert os.fspath(WS.gates("cpu-debian12", "amd64")) == "build/cpu-debian12/gates-amd64.json"


def test_records_are_frozen_and_refuse_unknown_fields():
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        BUILT.layers = 4  # a record is what a stage said
    with pytest.raises(ValidationError):
        BuiltImage(**BUILT.model_dump(), surprise=1)


def test_replace_keeps_a_record_valid(tmp_path):
    ws = Workspace(tmp_path)
    write_record(ws, BUILT.model_copy(update={"extra": {"digest": "sha256:cd"}}))
    assert read_record(ws, "cpu-debian12", "amd64").extra == {"digest": "sha256:cd"}
