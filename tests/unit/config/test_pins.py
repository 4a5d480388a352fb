"""variants.yaml `pins:`: a package pinned per OS (a vendor kernel's need: Kylin V10's 4.19.90-52
kernel and an older nvidia-ml-py) or per variant, and the locks honour it: a conda variant with
pins gets a solve and a lock of its own (the others keep theirs), a pip env's one lock must satisfy
the pins of every variant on it. A bad pin is one error naming its yaml path."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from rapidship.config.matrix import parse_matrix
from rapidship.errors import ConfigError
from rapidship.lock.conda import check_conda_locks, lock_path, lock_text, solve_specs, target_digest, targets_for, variant_target
from rapidship.lock.pip import load_env_spec, unmet_pins
from support.commands import ROOT

GOOD = (ROOT / "variants.yaml").read_text()
KYLIN_PIN = {"nvidia-ml-py": "<12.560"}


def matrix_with(edit) -> object:
    doc = yaml.safe_load(GOOD)
    edit(doc)
    return parse_matrix(yaml.safe_dump(doc), "variants.yaml")


def kylin_pinned(doc):
    doc["oses"]["kylin10"]["pins"] = dict(KYLIN_PIN)


def test_an_os_pin_reaches_every_variant_on_that_os_and_an_override_beats_it():
    m = matrix_with(kylin_pinned)
    assert m.get("cuda12-kylin10").pins == (("nvidia-ml-py", "<12.560"),)
    assert m.get("cuda12-kylin10").pins_at == {"nvidia-ml-py": "variants.yaml: oses.kylin10.pins.nvidia-ml-py"}
    assert m.get("cuda12-ubuntu22").pins == ()

    def both(doc):
        kylin_pinned(doc)
        doc["overrides"]["cuda12-kylin10"] = {"pins": {"nvidia-ml-py": "==12.535.161", "pynvml": "<12"}}
    v = matrix_with(both).get("cuda12-kylin10")
    assert v.pins == (("nvidia-ml-py", "==12.535.161"), ("pynvml", "<12"))
    assert v.pins_at["nvidia-ml-py"] == "variants.yaml: overrides.cuda12-kylin10.pins.nvidia-ml-py"


@pytest.mark.parametrize("pins, where, words", [
    (["nvidia-ml-py<12"], "variants.yaml: oses.kylin10.pins", "is not a mapping"),
    ({"NVIDIA ML": "<12"}, "variants.yaml: oses.kylin10.pins.NVIDIA ML", "is not a package name"),
    ({"nvidia-ml-py": "latest"}, "variants.yaml: oses.kylin10.pins.nvidia-ml-py", "is not a version constraint"),
    ({"nvidia-ml-py": True}, "variants.yaml: oses.kylin10.pins.nvidia-ml-py", "is not a version constraint"),
    ({"nvidia-ml-py": "<12; rm -rf /"}, "variants.yaml: oses.kylin10.pins.nvidia-ml-py", "is not a version constraint"),
])
def test_a_bad_pin_is_one_error_naming_its_yaml_path(pins, where, words):
    with pytest.raises(ConfigError) as err:
        matrix_with(lambda doc: doc["oses"]["kylin10"].update(pins=pins))
    assert err.value.where == where and words in str(err.value)


def test_a_pinned_conda_variant_solves_the_pin_into_a_lock_of_its_own():
    plain, pinned = parse_matrix(GOOD, "variants.yaml"), matrix_with(kylin_pinned)
    spec = load_env_spec("rapids", ROOT / "envs")
    arch = pinned.get("cuda12-kylin10").arches[0]
    before, after = variant_target(plain.get("cuda12-kylin10"), arch), variant_target(pinned.get("cuda12-kylin10"), arch)
    assert "nvidia-ml-py <12.560" in solve_specs(spec, after) and "nvidia-ml-py <12.560" not in solve_specs(spec, before)
    assert target_digest(spec, after) != target_digest(spec, before)
    assert lock_path(after) != lock_path(before) and lock_path(after).parent.name.startswith("py3.11-cuda12.9-pins-")
    # ubuntu22 shares kylin10's unpinned solve and keeps its committed lock
    assert lock_path(variant_target(pinned.get("cuda12-ubuntu22"), arch)) == lock_path(before)
    assert len(targets_for(spec, pinned)) == len(targets_for(spec, plain)) + len(pinned.get("cuda12-kylin10").arches)


def test_the_lock_check_fails_closed_until_the_pinned_lock_is_made(tmp_path):
    spec = load_env_spec("rapids", ROOT / "envs")
    plain, pinned = parse_matrix(GOOD, "variants.yaml"), matrix_with(kylin_pinned)

    def made(matrix):   # the locks `invoke lock` would write (no packages: the check reads the header)
        for target in targets_for(spec, matrix):
            path = lock_path(target, tmp_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(lock_text(spec, target, []))
    made(plain)
    assert check_conda_locks(spec, plain, tmp_path)
    with pytest.raises(ConfigError) as err:
        check_conda_locks(spec, pinned, tmp_path)
    assert "/py3.11-cuda12.9-pins-" in err.value.where and "invoke lock --env rapids" in str(err.value)
    made(pinned)
    assert any("-pins-" in str(p) for p in check_conda_locks(spec, pinned, tmp_path))


LOCK = "nvidia-ml-py==13.615.71 \\\n    --hash=sha256:" + "0" * 64 + "\npynvml==13.0.1 \\\n    --hash=sha256:" + "1" * 64 + "\n"


@pytest.mark.parametrize("pins, unmet", [
    ((("nvidia-ml-py", ">=13"),), []),
    ((("nvidia-ml-py", "=13.615"),), []),
    ((("nvidia-ml-py", "<12.560"),), ["nvidia-ml-py"]),
    ((("Nvidia_ML_Py", "<13.616"),), []),
    ((("cupy", "<14"),), ["cupy"]),
])
def test_a_pip_lock_honours_a_pin_or_says_which_not(pins, unmet):
    assert [name for name, _ in unmet_pins(LOCK, pins)] == unmet


def test_invoke_lock_check_names_the_yaml_path_of_a_pin_the_pip_lock_breaks(tmp_path):
    doc = yaml.safe_load(GOOD)
    doc["overrides"]["cuda12-debian12"]["pins"] = {"nvidia-ml-py": "<12.560"}
    bad = tmp_path / "variants.yaml"
    bad.write_text(yaml.safe_dump(doc))
    args = ["invoke", "lock", "--check", "--env", "rapids-pip", "--variants-file"]
    run = subprocess.run([*args, str(bad)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 2 and "overrides.cuda12-debian12.pins.nvidia-ml-py" in run.stderr
    assert "nvidia-ml-py==13.615.71, outside <12.560" in " ".join(run.stderr.split()) and "Traceback" not in run.stderr
    doc["overrides"]["cuda12-debian12"]["pins"] = {"nvidia-ml-py": ">=13"}
    bad.write_text(yaml.safe_dump(doc))
    run = subprocess.run([*args, str(bad)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
