"""variants.yaml -> records, and every kind of bad input -> one clear ConfigError."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rapidship.errors import ConfigError
from rapidship.config.matrix import Arch, Flavour, load_matrix, parse_matrix

from support.commands import ROOT  # noqa: E402
GOOD = (ROOT / "variants.yaml").read_text()


def doc() -> dict:
    return yaml.safe_load(GOOD)


def parse(d: dict):
    return parse_matrix(yaml.safe_dump(d, sort_keys=False), "variants.yaml")


def test_committed_matrix_has_the_required_variants():
    m = load_matrix(ROOT / "variants.yaml")
    assert set(m.variants) == {"cuda12-ubuntu22", "cuda13-ubuntu24", "cuda12-kylin10", "cuda12-debian12", "cpu-debian12"}
    v = m.variants["cuda12-ubuntu22"]
    assert (v.arches, v.flavour, v.family, v.cuda) == ((Arch.amd64, Arch.arm64), Flavour.conda, "deb", "12.9")
    assert m.variants["cuda12-kylin10"].family == "rpm"
    assert m.variants["cuda12-kylin10"].bases.runtime.startswith("harbor.example.internal/kylin/")
    assert m.variants["cpu-debian12"].cuda is None and m.variants["cpu-debian12"].flavour is Flavour.pip
    assert m.variants["cuda12-debian12"].flavour is Flavour.pip
    assert all(v.budget_bytes == 4_700_000_000 and v.uid == 1001 for v in m.variants.values())


def test_tags_follow_rapids_practice():
    m = load_matrix(ROOT / "variants.yaml")
    assert m.variants["cuda12-ubuntu22"].tag() == "26.10-cuda12.9-ubuntu22.04-py3.11"
    assert m.variants["cuda12-ubuntu22"].tag("arm64") == "26.10-cuda12.9-ubuntu22.04-py3.11-arm64"
    assert m.variants["cpu-debian12"].ref("amd64") == "rapidship/dask:26.10-cpu-debian12-py3.11-amd64"


def test_bases_per_stage_go_through_the_registry_prefix():
    m = load_matrix(ROOT / "variants.yaml")
    conda = m.variants["cuda12-ubuntu22"]
    assert conda.bases.runtime == "harbor.example.internal/dockerhub/library/ubuntu:22.04"
    assert conda.bases.builder == "harbor.example.internal/dockerhub/library/python:3.11-slim-bookworm"
    pip = m.variants["cpu-debian12"]
    assert pip.bases.builder == pip.bases.runtime


def _edit(path: str, value):
    d = doc()
    node = d
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node.setdefault(k, {})
    node[keys[-1]] = value
    return d


BAD = [
    # (description, document edit, expected yaml path, expected words)
    ("unknown key", _edit("defaults.colour", "blue"), "defaults.colour", "unknown key"),
    ("unknown key in override", _edit("overrides.cpu-debian12.flavor", "pip"), "overrides.cpu-debian12.flavor", "unknown key"),
    ("bad rapids version", _edit("defaults.rapids", "26"), "defaults.rapids", "not a version"),
    ("python as a float", _edit("defaults.python", 3.10), "defaults.python", "quote versions"),
    ("bad cuda version", _edit("axes.cuda", ["12.9", "13", "cpu"]), "axes.cuda", "not a version"),
    ("unknown os family", _edit("oses.kylin10.family", "apk"), "oses.kylin10.family", "not one of"),
    ("arch a base does not offer", _edit("overrides.cpu-debian12.arches", ["amd64", "riscv64"]),
     "overrides.cpu-debian12.arches[1]", "not one of"),
    ("arch the os does not offer",
     {**_edit("oses.kylin10.arches", ["amd64"]), "overrides": {"cuda12-kylin10": {"arches": ["amd64", "arm64"]}}},
     "overrides.cuda12-kylin10.arches[1]", "offers no base for arm64"),
    ("missing base", _edit("oses.ubuntu22.image", None), "oses.ubuntu22.image", "expected a str"),
    ("variant removed by exclude", _edit("overrides.cpu-ubuntu22", {"python": "3.11"}),
     "overrides.cpu-ubuntu22", "removed by exclude[4]"),
    ("override of an unknown variant", _edit("overrides.cuda11-ubuntu22", {"python": "3.11"}),
     "overrides.cuda11-ubuntu22", "no such variant"),
    ("duplicate id from the axes", _edit("axes.cuda", ["12.8", "12.9", "13.0", "cpu"]), "axes.cuda", "both make variant id"),
    ("unknown os on an axis", _edit("axes.os", ["ubuntu22", "alpine3"]), "axes.os[1]", "unknown os"),
    ("exclude on a non-axis", _edit("exclude", [{"gpu": "h100"}]), "exclude[0].gpu", "not an axis"),
    ("root uid", _edit("defaults.uid", 0), "defaults.uid", "greater than 0"),
    ("pip flavour on rpm", _edit("overrides.cuda12-kylin10", {"flavour": "pip"}), "overrides.cuda12-kylin10.flavour",
     "Debian-family"),
    ("bad image reference", _edit("oses.debian12.image", "Library/Debian:12"), "oses.debian12.image", "not an image reference"),
    ("everything excluded", _edit("axes.os", ["ubuntu24"]) | {"exclude": [{"os": "ubuntu24"}], "overrides": {}},
     "exclude", "every combination"),
    # gpu_archs: compute capabilities as ints major*10+minor
    ("gpu_archs not a list", _edit("defaults.gpu_archs", 90), "defaults.gpu_archs", "expected a list"),
    ("gpu_archs some other word", _edit("defaults.gpu_archs", "every"), "defaults.gpu_archs", "expected a list"),
    ("gpu_archs null", _edit("defaults.gpu_archs", None), "defaults.gpu_archs", "no value (null)"),
    ("gpu_archs empty", _edit("defaults.gpu_archs", []), "defaults.gpu_archs", "the list is empty"),
    ("gpu_archs unknown capability", _edit("defaults.gpu_archs", [80, 91]), "defaults.gpu_archs[1]",
     "91 is not a known compute capability"),
    ("gpu_archs as a string", _edit("defaults.gpu_archs", [80, "90"]), "defaults.gpu_archs[1]",
     "'90' is not an int compute capability (a string: write the bare int 90)"),
    ("gpu_archs as sm_ name", _edit("defaults.gpu_archs", ["sm_80"]), "defaults.gpu_archs[0]", "write the bare int 80"),
    ("gpu_archs as a bool", _edit("defaults.gpu_archs", [True]), "defaults.gpu_archs[0]", "true is a boolean"),
    ("gpu_archs as a float", _edit("defaults.gpu_archs", [8.6]), "defaults.gpu_archs[0]", "(write 86 for 8.6)"),
    ("gpu_archs duplicate", _edit("defaults.gpu_archs", [90, 80, 90]), "defaults.gpu_archs[2]",
     "90 is listed twice (also at [0])"),
    ("gpu_archs bad in override", _edit("overrides.cuda12-debian12.gpu_archs", [86, 75, 0]),
     "overrides.cuda12-debian12.gpu_archs[2]", "0 is not a known compute capability"),
    ("gpu_archs empty in override", _edit("overrides.cuda12-debian12.gpu_archs", []),
     "overrides.cuda12-debian12.gpu_archs", "the list is empty"),
    ("gpu_archs per arch, unknown arch", _edit("overrides.cuda12-debian12.gpu_archs", {"amd64": [80], "riscv": [90]}),
     "overrides.cuda12-debian12.gpu_archs.riscv", "'riscv' is not an arch"),
    ("gpu_archs per arch, an arch left out", _edit("overrides.cuda12-debian12.gpu_archs", {"amd64": [80, 90]}),
     "overrides.cuda12-debian12.gpu_archs", "names no fleet for arm64"),
    ("gpu_archs per arch, all for one arch", _edit("overrides.cuda12-debian12.gpu_archs", {"amd64": [80], "arm64": "all"}),
     "overrides.cuda12-debian12.gpu_archs.arm64", "`all` is for the whole variant"),
    ("gpu_archs per arch, bad item", _edit("overrides.cuda12-debian12.gpu_archs", {"amd64": [80], "arm64": [90, 122]}),
     "overrides.cuda12-debian12.gpu_archs.arm64[1]", "122 is not a known compute capability"),
    ("gpu_archs per arch, empty mapping", _edit("overrides.cuda12-debian12.gpu_archs", {}),
     "overrides.cuda12-debian12.gpu_archs", "the mapping is empty"),
    ("gpu_archs on a cpu variant", _edit("overrides.cpu-debian12.gpu_archs", [80]),
     "overrides.cpu-debian12.gpu_archs", "cpu variants have no device code"),
    ("gpu_archs all on a cpu variant", _edit("overrides.cpu-debian12.gpu_archs", "all"),
     "overrides.cpu-debian12.gpu_archs", "cpu variants have no device code"),
]


@pytest.mark.parametrize("case,document,path,words", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_file_path_and_fix(case, document, path, words):
    with pytest.raises(ConfigError) as caught:
        parse(document)
    err = caught.value
    assert err.where == f"variants.yaml: {path}", err.message
    assert words in err.problem, err.message
    assert err.fix, "every error says what to do"


def test_gpu_archs_resolve_from_defaults_overrides_all_and_cpu():
    m = load_matrix(ROOT / "variants.yaml")
    assert m.defaults.gpu_archs == (80, 90)
    assert all(v.gpu_archs == (80, 90) for v in m.variants.values() if v.cuda)
    assert m.variants["cpu-debian12"].gpu_archs is None                     # no device code at all
    assert m.variants["cuda12-ubuntu22"].gpu_archs_label() == "80,90"
    assert m.variants["cpu-debian12"].gpu_archs_label() == "none"

    d = _edit("defaults.gpu_archs", [90, 80, 120])                          # stored sorted
    d["overrides"]["cuda12-kylin10"] = {"gpu_archs": [89, 86]}
    d["overrides"]["cuda13-ubuntu24"]["gpu_archs"] = "all"                  # reset: keep everything
    m = parse(d)
    assert m.variants["cuda12-ubuntu22"].gpu_archs == (80, 90, 120)
    assert m.variants["cuda12-kylin10"].gpu_archs == (86, 89)
    assert m.variants["cuda12-kylin10"].gpu_archs_label() == "86,89"
    assert m.variants["cuda13-ubuntu24"].gpu_archs is None
    assert m.variants["cuda13-ubuntu24"].gpu_archs_label() == "all"
    assert m.variants["cpu-debian12"].gpu_archs is None

    d = doc()
    del d["defaults"]["gpu_archs"]                                          # unset: keep everything
    m = parse(d)
    assert m.defaults.gpu_archs is None
    assert all(v.gpu_archs is None for v in m.variants.values())
    assert parse(_edit("defaults.gpu_archs", "all")).variants["cuda12-ubuntu22"].gpu_archs_label() == "all"


def test_invoke_matrix_shows_gpu_archs():
    proc = subprocess.run(["invoke", "matrix", "--json"], cwd=ROOT, capture_output=True, text=True, check=True)
    data = json.loads(proc.stdout)
    assert data["cuda12-ubuntu22"]["gpu_archs"] == [80, 90] and data["cpu-debian12"]["gpu_archs"] is None
    proc = subprocess.run(["invoke", "matrix"], cwd=ROOT, capture_output=True, text=True, check=True)
    # the table is the output: on stdout (`| less` showed nothing), one line per variant in a pipe
    header, *rows = proc.stdout.splitlines()[1:]
    assert header.split("\t")[:4] == ["id", "rapids", "cuda", "gpu_archs"] and proc.stderr == ""
    by_id = {r.split("\t")[0]: r.split("\t") for r in rows}
    assert set(by_id) == set(data) and by_id["cuda12-ubuntu22"][3] == "80,90"
    assert by_id["cpu-debian12"][-1] == data["cpu-debian12"]["tag"] or by_id["cpu-debian12"][-1].endswith(
        data["cpu-debian12"]["tag"])                                      # a long ref whole, not folded


def test_duplicate_yaml_key_is_reported_with_its_line():
    text = GOOD.replace("overrides:\n", "overrides:\n  cpu-debian12:\n    python: \"3.11\"\n", 1)
    with pytest.raises(ConfigError) as caught:
        parse_matrix(text, "variants.yaml")
    assert caught.value.where.startswith("variants.yaml line ")
    assert "duplicate key 'cpu-debian12'" in caught.value.problem


def test_broken_yaml_and_missing_file():
    with pytest.raises(ConfigError, match="not valid YAML"):
        parse_matrix("defaults: [unclosed", "variants.yaml")
    with pytest.raises(ConfigError, match="file not found"):
        load_matrix(ROOT / "nope.yaml")


@st.composite
def documents(draw):
    """Random edits of the real document plus fully random YAML-ish values."""
    leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 2**40), st.floats(allow_nan=False),
                     st.text(max_size=12), st.lists(st.text(max_size=6), max_size=3))
    if draw(st.booleans()):
        return draw(st.recursive(leaf, lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=12))
    d = doc()
    for _ in range(draw(st.integers(1, 4))):
        section = draw(st.sampled_from(sorted(d)))
        node = d[section]
        if isinstance(node, dict) and node:
            key = draw(st.sampled_from(sorted(node)))
            if isinstance(node[key], dict) and node[key] and draw(st.booleans()):
                sub = draw(st.sampled_from(sorted(node[key])))
                node[key][sub] = draw(leaf)
            else:
                node[key] = draw(leaf)
        else:
            d[section] = draw(leaf)
    return d


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_random_documents_never_traceback(document):
    try:
        parse_matrix(yaml.safe_dump(document), "variants.yaml")
    except ConfigError as err:
        assert err.where.startswith("variants.yaml")


def test_invoke_prints_one_message_and_exit_2(tmp_path):
    bad = tmp_path / "variants.yaml"
    bad.write_text(GOOD.replace('python: "3.11"\n  flavour', "python: 3.10\n  flavour", 1))
    proc = subprocess.run(["invoke", "matrix", "--variants-file", str(bad)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{bad}: defaults.python: expected a str" in proc.stderr
    assert "fix:" in proc.stderr


@pytest.mark.parametrize("key", ["../../../outside", "Debian 12", "debiän12", "deb/12", "12debian", "a" * 40])
def test_os_keys_that_would_escape_paths_or_break_names_are_refused(key):
    # An OS key becomes part of variant ids, build/<id>/ paths, image tags and CI job names.
    d = doc()
    d["oses"][key] = d["oses"].pop("debian12")
    d["axes"]["os"] = [key if o == "debian12" else o for o in d["axes"]["os"]]
    d["exclude"] = [dict(e, os=key) if e.get("os") == "debian12" else e for e in d["exclude"]]
    d["overrides"] = {k.replace("debian12", key): v for k, v in d["overrides"].items()}
    with pytest.raises(ConfigError) as err:
        parse(d)
    assert err.value.where.startswith("variants.yaml: oses.") and "lowercase ASCII" in err.value.problem


def _bomb(levels: int) -> str:
    """A billion-laughs document: each level is nine aliases of the one below."""
    lines = ["defaults:", "  - &l0 ['x','x','x','x','x','x','x','x','x']"]
    for i in range(1, levels + 1):
        lines.append(f"  - &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_at_once():
    import time

    started = time.monotonic()
    with pytest.raises(ConfigError, match="more than 64 YAML aliases"):
        parse_matrix(_bomb(9), "variants.yaml")  # 9^10 elements if expanded
    assert time.monotonic() - started < 2


def test_a_small_bomb_under_the_alias_limit_gives_one_short_message():
    with pytest.raises(ConfigError) as err:
        parse_matrix(_bomb(6), "variants.yaml")  # 54 aliases, 9^7 leaves
    assert len(err.value.message) < 400 and "characters)" in err.value.message


def test_a_file_too_big_for_a_config_is_refused(tmp_path):
    from rapidship.config.matrix import load_matrix

    big = tmp_path / "variants.yaml"
    big.write_text("# " + "x" * (1 << 20) + "\n")
    with pytest.raises(ConfigError, match="more than a configuration file may be"):
        load_matrix(big)


def test_a_date_yaml_cannot_build_is_one_config_error():
    with pytest.raises(ConfigError, match=r"when \(line [0-9]+\).*is not a date"):
        parse_matrix(GOOD + "\nwhen: 2027-13-45\n", "variants.yaml")


MERGED = """  ubuntu22: &ubuntu
    family: deb
    distro: ubuntu
    version: "22.04"
    arches: [amd64, arm64]
    image: library/ubuntu:22.04
  ubuntu24:
    <<: *ubuntu
"""
UBUNTU_WITH_MERGE = MERGED + """    version: "24.04"
    image: library/ubuntu:24.04
"""


def _with_merge(extra: str = "") -> str:
    start, end = GOOD.index("  ubuntu22:\n"), GOOD.index("  debian12:\n")
    return GOOD[:start] + UBUNTU_WITH_MERGE + extra + GOOD[end:]


def test_yaml_merge_keys_are_ordinary_yaml():
    """`<<: *base` (as GitLab CI files use it) reads as the mapping written out."""
    text = GOOD[:GOOD.index("  ubuntu22:\n")] + MERGED + GOOD[GOOD.index("  debian12:\n"):]
    merged, written = parse_matrix(text, "variants.yaml"), parse_matrix(GOOD, "variants.yaml")
    by_os = {v.os: v for v in merged.variants.values()}
    assert by_os["ubuntu24"].os_version == "22.04" and by_os["ubuntu24"].arches == by_os["ubuntu22"].arches
    assert set(merged.variants) == set(written.variants)


def test_a_key_written_beside_a_merge_overrides_the_merged_one():
    """The YAML merge spec: keys of the mapping itself override merged ones (refused as duplicates
    before, which made merges useless for variants); an earlier merged mapping wins over a later."""
    by_os = {v.os: v for v in parse_matrix(_with_merge(), "variants.yaml").variants.values()}
    assert by_os["ubuntu24"].os_version == "24.04"       # written here, over the anchor's 22.04
    assert by_os["ubuntu24"].arches == by_os["ubuntu22"].arches   # the rest still merged
    from rapidship.config.yamlconf import load_yaml

    assert load_yaml("a: &a {k: 1, j: 1}\nb: &b {k: 2, m: 2}\nc:\n  <<: [*a, *b]\n", "x.yaml")["c"] == \
        {"k": 1, "j": 1, "m": 2}


def test_a_key_written_twice_in_one_mapping_is_still_named():
    from rapidship.config.yamlconf import load_yaml

    with pytest.raises(ConfigError) as caught:
        load_yaml("base: &b {k: 0}\nv:\n  <<: *b\n  k: 1\n  k: 2\n", "variants.yaml")
    assert caught.value.problem == "duplicate key 'k' (first at line 4)" and caught.value.where == "variants.yaml line 5"


def test_a_fleet_per_arch_gives_each_arch_its_own_list():
    # an amd64 fleet of A100 + H100, an arm64 one of GH200 + GB10
    d = _edit("overrides.cuda12-debian12.gpu_archs", {"arm64": [121, 90], "amd64": [80, 90]})
    v = parse(d).variants["cuda12-debian12"]
    assert v.gpu_archs_for("amd64") == (80, 90) and v.gpu_archs_for(Arch.arm64) == (90, 121)
    assert v.gpu_archs_label("arm64") == "90,121" and v.gpu_archs_label() == "amd64 80,90; arm64 90,121"
    d = _edit("defaults.gpu_archs", {"amd64": [80], "arm64": [90]})  # in defaults: every CUDA variant
    m = parse(d)
    assert m.variants["cuda12-ubuntu22"].gpu_archs_for("arm64") == (90,)
    assert m.variants["cpu-debian12"].gpu_archs_label("arm64") == "none"


def test_a_run_identity_names_the_engine_images_of_a_run_and_bad_ones_are_refused():
    from rapidship.config.matrix import run_id

    v = load_matrix(ROOT / "variants.yaml").variants["cpu-debian12"]
    assert v.local_ref("amd64", "ci4711") == "rapidship/dask:26.10-cpu-debian12-py3.11-amd64-ci4711"
    assert v.local_ref("amd64", "") == v.ref("amd64")
    assert run_id({"RAPIDSHIP_RUN_ID": "ci4711"}) == "ci4711" and run_id({}) == ""
    for bad in ("ci 4711", "-x", "a/b", "x" * 41, "ci$X"):
        with pytest.raises(ConfigError) as err:
            run_id({"RAPIDSHIP_RUN_ID": bad})
        assert err.value.where == "RAPIDSHIP_RUN_ID"


@pytest.mark.parametrize("value", ["200", "4", "true", "lots", "62"])
def test_a_layer_budget_off_the_engines_limits_is_refused_with_its_reason(value):
    text = (ROOT / "variants.yaml").read_text()
    assert "layer_budget: 60" in text
    with pytest.raises(ConfigError) as caught:
        parse_matrix(text.replace("layer_budget: 60", f"layer_budget: {value}"))
    assert caught.value.where == "variants.yaml: defaults.layer_budget"
    assert "from 5 to 61" in caught.value.problem and "100 layers" in caught.value.problem


def test_the_layer_budget_comes_from_defaults_and_overrides():
    text = (ROOT / "variants.yaml").read_text()
    assert {v.layer_budget for v in parse_matrix(text).variants.values()} == {60}
    doc = yaml.safe_load(text)
    doc["overrides"]["cpu-debian12"]["layer_budget"] = 12
    assert parse_matrix(yaml.safe_dump(doc)).variants["cpu-debian12"].layer_budget == 12
    doc["overrides"]["cpu-debian12"]["layer_budget"] = 500
    with pytest.raises(ConfigError, match="overrides.cpu-debian12.layer_budget"):
        parse_matrix(yaml.safe_dump(doc))
