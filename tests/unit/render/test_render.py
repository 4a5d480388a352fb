"""Rendered Dockerfiles: goldens reviewed as diffs, StrictUndefined, and the image contract."""

from __future__ import annotations

import os
import shutil
import json
from pathlib import Path

import pytest

from rapidship.errors import ConfigError
from rapidship.render.lint import lint
from rapidship.config.matrix import load_matrix
from rapidship.render.dockerfile import make_context, render, render_dockerfile
from rapidship.render.layer_plan import from_sizes

from support.commands import ROOT  # noqa: E402
GOLDEN = ROOT / "tests" / "golden"
MATRIX = load_matrix(ROOT / "variants.yaml")
UPDATE = os.environ.get("RAPIDSHIP_UPDATE_GOLDENS") == "1"


@pytest.fixture(autouse=True)
def _in_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize("vid", sorted(MATRIX.variants))
def test_rendered_dockerfile_matches_golden(vid, tmp_path):
    """Set RAPIDSHIP_UPDATE_GOLDENS=1 to rewrite them after an intended template change."""
    rendered = Path(render(MATRIX.variants[vid], out_root=tmp_path).dockerfile).read_text()
    golden = GOLDEN / f"{vid}.Dockerfile"
    if UPDATE:
        golden.write_text(rendered)
    assert golden.is_file(), f"no golden for {vid}: run with RAPIDSHIP_UPDATE_GOLDENS=1 and review the diff"
    assert rendered == golden.read_text(), f"{vid} changed: review, then RAPIDSHIP_UPDATE_GOLDENS=1"


@pytest.mark.parametrize("vid", sorted(MATRIX.variants))
def test_rendered_dockerfile_keeps_the_image_contract(vid, tmp_path):
    v = MATRIX.variants[vid]
    text = Path(render(v, out_root=tmp_path).dockerfile).read_text()
    assert "# syntax=" not in text  # the frontend image cannot be pulled in air-gapped sites
    stages = [line.split()[-1] for line in text.splitlines() if line.startswith("FROM ")]
    # either flavour: a stage per planned layer that makes it (a patch remakes its own), the index of
    # every layer's large files, a stage per layer that links its copies of files below, the records'
    # merge (a conda env not locked here: its rest layer alone)
    n = sum(stage.endswith("-made") for stage in stages)
    made, linked = [f"env-{k}-made" for k in range(1, n + 1)], [f"env-{k}" for k in range(1, n + 1)]
    env = [*made, "env-index", *linked, "env-records"] if n else []
    assert stages == ["builder", *env, "runtime"]
    assert n >= 1
    assert f"USER {v.uid}:0" in text
    assert "ENTRYPOINT [\"/usr/local/bin/rapids-entrypoint\"]" in text
    assert f'io.rapidship.python.version="{v.python}"' in text
    assert f'io.rapidship.gpu.archs="{v.gpu_archs_label()}"' in text
    assert "ARG TARGETARCH" in text
    runtime = text.split(" AS runtime", 1)[1]
    for forbidden in ("gcc", "build-essential", "conda-pack", "pip install"):
        assert forbidden not in runtime
    assert "rm -rf /var/lib/apt/lists/*" in runtime or "dnf clean all" in runtime
    assert "--mount=type=secret,id=cacert" in text
    assert ("NVIDIA_DRIVER_CAPABILITIES=compute,utility" in text) == bool(v.cuda)


@pytest.mark.parametrize("vid", sorted(MATRIX.variants))
def test_every_image_keeps_within_100_layers_base_and_runtime_steps_included(vid, tmp_path):
    from rapidship.imagebuild.base_layers import BUDGET, RUNTIME_BUDGET
    from rapidship.render.layer_plan import IMAGE_LAYERS, MOST_BUDGET, RUNTIME_STEPS

    text = Path(render(MATRIX.variants[vid], out_root=tmp_path).dockerfile).read_text()
    runtime = text.split(" AS runtime", 1)[1].splitlines()
    steps = [line.split()[0] for line in runtime if line.split()[:1] in (["COPY"], ["RUN"], ["ADD"])]
    env = sum(line.startswith("COPY --from=env-") and "/out/layers/" in line for line in runtime)
    assert len(steps) - env - 1 == RUNTIME_STEPS  # beside the env's and the apt step: what MOST_BUDGET leaves room for
    # the base at its most, the runtime's apt step split at its most (one layer becomes RUNTIME_BUDGET)
    assert BUDGET + len(steps) - 1 + RUNTIME_BUDGET <= IMAGE_LAYERS
    assert env <= MOST_BUDGET == IMAGE_LAYERS - BUDGET - RUNTIME_BUDGET - RUNTIME_STEPS


def test_render_writes_context_and_record(tmp_path):
    rec = render(MATRIX.variants["cpu-debian12"], out_root=tmp_path)
    out = Path(rec.out_dir)
    assert (out / "lock" / "requirements.txt").is_file()
    assert os.access(out / "runtime" / "bin" / "rapids-entrypoint", os.X_OK)
    assert (out / "runtime" / "rapids_runtime" / "doctor.py").is_file()
    assert len(rec.lock_sha256) == 64 and (out / "render.json").is_file()


def test_missing_value_in_template_is_an_error(tmp_path):
    templates = tmp_path / "templates"
    shutil.copytree(ROOT / "templates", templates)
    deb = templates / "deb" / "Dockerfile.j2"
    deb.write_text(deb.read_text() + "\nLABEL x={{ v.no_such_field }}\n")
    v = MATRIX.variants["cpu-debian12"]
    with pytest.raises(ConfigError, match="undefined value"):
        render_dockerfile(v, make_context(v, {}), templates)


def test_lint_passes_rendered_and_fails_a_bad_template(tmp_path):
    v = MATRIX.variants["cpu-debian12"]
    good = Path(render(v, out_root=tmp_path / "good").dockerfile)
    assert lint(good).passed

    templates = tmp_path / "templates"
    shutil.copytree(ROOT / "templates", templates)
    deb = templates / "deb" / "Dockerfile.j2"
    # Classic mistakes: cd inside RUN, and apt-get upgrade.
    deb.write_text(deb.read_text().replace("SHELL [\"/bin/bash\", \"-o\", \"pipefail\", \"-c\"]\nRUN --mount=type=secret,id=apt-auth",
                                           "SHELL [\"/bin/bash\", \"-o\", \"pipefail\", \"-c\"]\nRUN cd /tmp && apt-get upgrade -y\nRUN --mount=type=secret,id=apt-auth", 1))
    bad = render(v, out_root=tmp_path / "bad", templates=templates)
    report = lint(Path(bad.dockerfile))
    assert not report.passed
    assert {"DL3003", "DL3005"} & {f.code for f in report.findings}


def test_render_again_keeps_build_records(tmp_path):
    v = MATRIX.variants["cpu-debian12"]
    first = Path(render(v, out_root=tmp_path).out_dir)
    (first / "build-amd64.json").write_text("{}")
    (first / "runtime" / "stale.txt").write_text("from an older render")
    again = Path(render(v, out_root=tmp_path).out_dir)
    assert (again / "build-amd64.json").is_file()
    assert not (again / "runtime" / "stale.txt").exists()


def test_concurrent_renders_of_every_variant_never_trip_over_each_other(tmp_path):
    # Four `invoke render --all` at once, three rounds: each waits for the other on the variant's
    # lock, and every render.json lists exactly the files that are there.
    import subprocess

    for _ in range(3):
        runs = [subprocess.Popen(["invoke", "render", "--all"], cwd=ROOT, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True) for _ in range(4)]
        errors = [r.communicate()[1] for r in runs]
        assert all(r.returncode == 0 for r in runs), errors
    for record in (ROOT / "build").glob("*/render.json"):
        doc = json.loads(record.read_text())
        listed = {record.parent / f for f in doc["files"]}
        present = {p for d in ("lock", "builder", "runtime") for p in (record.parent / d).rglob("*") if p.is_file()}
        assert listed == present | {record.parent / "Dockerfile"}
        assert not list(record.parent.glob(".render-*"))  # no staging folder left behind


def test_an_interrupted_render_leaves_the_previous_context_whole(tmp_path, monkeypatch):
    from rapidship.render import dockerfile as stage

    v = load_matrix(ROOT / "variants.yaml").get("cpu-debian12")
    first = stage.render(v, out_root=tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file() and ".render.lock" not in p.name)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(stage, "_copy_runtime", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stage.render(v, out_root=tmp_path)
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file() and ".render.lock" not in p.name)
    assert after == before and json.loads((tmp_path / v.id / "render.json").read_text())["files"] == first.files


def test_a_file_where_the_context_goes_is_named(tmp_path):
    from rapidship.errors import ConfigError
    from rapidship.render.dockerfile import render

    v = load_matrix(ROOT / "variants.yaml").get("cpu-debian12")
    (tmp_path / v.id).write_text("not a directory")
    with pytest.raises(ConfigError, match="is a file, where the build context directory goes"):
        render(v, out_root=tmp_path)


def test_an_env_without_a_spec_is_named_not_rendered_as_unlocked(tmp_path):
    from rapidship.errors import ConfigError
    from rapidship.render.dockerfile import render

    v = load_matrix(ROOT / "variants.yaml").get("cpu-debian12").model_copy(update={"env": "no-such-env"})
    with pytest.raises(ConfigError, match="'no-such-env' has no env spec"):
        render(v, out_root=tmp_path)


def test_a_fleet_per_arch_prunes_and_labels_each_arch_for_its_own(tmp_path):
    import yaml as _yaml

    from rapidship.config.matrix import parse_matrix

    doc = _yaml.safe_load((ROOT / "variants.yaml").read_text())
    doc["overrides"]["cuda12-debian12"]["gpu_archs"] = {"amd64": [80, 90], "arm64": [90, 121]}
    v = parse_matrix(_yaml.safe_dump(doc), "variants.yaml").variants["cuda12-debian12"]
    text = Path(render(v, out_root=tmp_path).dockerfile).read_text()
    assert '--keep "$(case "${TARGETARCH}" in amd64) echo 80,90 ;; arm64) echo 90,121 ;; esac)"' in text
    assert "AS runtime-common" in text and text.count("io.rapidship.gpu.archs=") == 2
    amd64 = text.split("AS runtime-amd64", 1)[1].split("FROM", 1)[0]
    arm64 = text.split("AS runtime-arm64", 1)[1].split("FROM", 1)[0]
    assert 'io.rapidship.gpu.archs="80,90"' in amd64 and 'io.rapidship.gpu.archs="90,121"' in arm64
    assert text.rstrip().endswith("FROM runtime-${TARGETARCH} AS runtime")  # the build's --target
    assert lint(Path(tmp_path / v.id / "Dockerfile")).passed


def test_a_pip_os_of_unknown_glibc_is_one_error_naming_the_os():
    v = MATRIX.variants["cpu-debian12"].model_copy(update={"os_version": "99"})
    with pytest.raises(ConfigError) as caught:
        make_context(v, {})
    assert caught.value.where == "variants.yaml: oses.debian12" and "no glibc version known for debian 99" in caught.value.problem
    assert make_context(MATRIX.variants["cpu-debian12"], {}).glibc_minor == 36  # Debian 12: glibc 2.36


def test_the_build_context_carries_every_module_the_pruner_imports():
    # the builder runs `python -m prune` from the copied files alone: a module left out is an
    # ImportError in the middle of a RAPIDS build (inplace.py once was)
    import ast

    from rapidship.render import dockerfile

    wanted = set()
    for name in dockerfile.PRUNER_FILES:
        tree = ast.parse((dockerfile.PRUNER_SRC / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                wanted.update(f"{alias.name}.py" for alias in node.names) if node.module is None \
                    else wanted.add(f"{node.module}.py")
    assert wanted <= set(dockerfile.PRUNER_FILES), wanted - set(dockerfile.PRUNER_FILES)
    # host.py is the host's `invoke prune` front end only
    assert {p.name for p in dockerfile.PRUNER_SRC.glob("*.py")} == set(dockerfile.PRUNER_FILES) | {"host.py"}


def test_the_env_layers_are_the_plan_render_writes_from_the_lock(tmp_path):
    # a patch of one package must change its layer: one COPY per planned layer, in the plan's order
    from rapidship.lock.sizes import locked_hashes

    for vid, env in (("cuda12-debian12", "rapids-pip"), ("cpu-debian12", "dask-cpu")):
        rec = render(MATRIX.variants[vid], out_root=tmp_path)
        text = Path(rec.dockerfile).read_text()
        plan = json.loads((Path(rec.out_dir) / "builder" / "layer-plan.json").read_text())
        copies = [line.split()[1:3] for line in text.splitlines() if line.startswith("COPY --from=env-") and "/out/layers/" in line]
        # the source path names the layer: the image's history (created_by) keeps it, --from it drops
        assert copies == [[f"--from=env-{n}", f"/out/layers/{layer['name']}/"] for n, layer in enumerate(plan["layers"], 1)]
        # each layer's stage installs its own part of the lock, and every line of each arch's lock is in one part
        parts = [line.split()[1] for line in text.splitlines() if line.startswith("COPY lock/parts/")]
        assert parts == [f"lock/parts/{layer['name']}/" for layer in plan["layers"][:-1]]
        for arch in MATRIX.variants[vid].arches:
            name = f"requirements-{arch.value}.txt"
            whole = (Path(rec.out_dir) / "lock" / name).read_text().splitlines()
            split = [line for layer in plan["layers"][:-1] for line in
                     ((Path(rec.out_dir) / "lock" / "parts" / layer["name"] / name).read_text().splitlines()
                      if (Path(rec.out_dir) / "lock" / "parts" / layer["name"] / name).is_file() else [])]
            assert sorted(split) == sorted(line for line in whole if not line.startswith("# "))
        assert "merge --plan /mnt/layer-plan.json" in text
        planned = [d["name"] for layer in plan["layers"] for d in layer["distributions"]]
        lock = (ROOT / "locks" / env / "requirements.txt").read_text()
        assert sorted(planned) == sorted(locked_hashes(lock))  # every distribution of the lock, once
        assert len(plan["layers"]) <= plan["budget"] == MATRIX.variants[vid].layer_budget
        disc = {d.name: d.disc_bytes for d in from_sizes(json.loads((ROOT / "locks" / env / "wheel-sizes.json")
                                                                  .read_text())["distributions"])}
        for layer in plan["layers"]:  # against the limit the plan was made with (doubled to fit the budget)
            sizes = [disc[d["name"]] for d in layer["distributions"]]
            if layer["why"].startswith("alone"):
                assert len(sizes) == 1 and sizes[0] > plan["group_bytes"]
            elif layer["name"] != "venv":
                assert layer["why"].startswith("grouped: ") and sum(sizes) <= plan["group_bytes"]
        assert plan["layers"][-1]["name"] == "venv"
    cuda = json.loads((tmp_path / "cuda12-debian12" / "builder" / "layer-plan.json").read_text())
    alone = {layer["name"] for layer in cuda["layers"]}
    assert {"cuda/nvidia-cublas-cu12", "rapids/libcudf-cu12", "rapids/cudf-cu12", "compiled/numpy"} <= alone


def test_a_layer_budget_too_small_for_the_plan_groups_more(tmp_path):
    v = MATRIX.variants["cuda12-debian12"].model_copy(update={"layer_budget": 20})
    plan = json.loads((Path(render(v, out_root=tmp_path).out_dir) / "builder" / "layer-plan.json").read_text())
    assert len(plan["layers"]) <= 20 and plan["group_bytes"] > 512 * 1024
    assert "cuda/nvidia-cublas-cu12" in {layer["name"] for layer in plan["layers"]}  # the giants stay alone


def test_render_refuses_a_lock_without_its_wheel_sizes(tmp_path):
    locks = tmp_path / "locks"
    shutil.copytree(ROOT / "locks", locks)
    shutil.copytree(ROOT / "envs", tmp_path / "envs")
    v = MATRIX.variants["cpu-debian12"]
    sizes = locks / "dask-cpu" / "wheel-sizes.json"
    record = json.loads(sizes.read_text())
    record["distributions"]["numpy"]["version"] = "1.0.0"
    sizes.write_text(json.dumps(record))
    with pytest.raises(ConfigError) as caught:
        render(v, out_root=tmp_path / "build", locks=locks)
    assert caught.value.where == str(sizes) and "records numpy 1.0.0, the lock" in caught.value.problem
    assert "invoke lock-sizes --env dask-cpu" in caught.value.fix
    sizes.unlink()
    with pytest.raises(ConfigError, match="missing: the layer plan weighs"):
        render(v, out_root=tmp_path / "build", locks=locks)