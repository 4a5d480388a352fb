"""The labels gate on label sets (no image needed): every required label, the GPU archs included."""

from __future__ import annotations


import pytest

from rapidship.gates.labels import OCI_REQUIRED, check_labels, expected_labels
from rapidship.config.matrix import load_matrix

from support.commands import ROOT  # noqa: E402
MATRIX = load_matrix(ROOT / "variants.yaml")


def good_labels(vid: str) -> dict[str, str]:
    v = MATRIX.variants[vid]
    return ({key: "x" for key in OCI_REQUIRED} | expected_labels(v)
            | {"io.rapidship.lock.sha256": "0" * 64})


@pytest.mark.parametrize("vid, archs", [("cuda12-ubuntu22", "80,90"), ("cpu-debian12", "none")])
def test_labels_gate_passes_with_the_variants_gpu_archs(vid, archs):
    labels = good_labels(vid)
    assert labels["io.rapidship.gpu.archs"] == archs
    report = check_labels(labels, MATRIX.variants[vid])
    assert report.passed, report.reasons


def test_labels_gate_fails_without_or_with_a_wrong_gpu_archs_label():
    v = MATRIX.variants["cuda12-ubuntu22"]
    missing = good_labels(v.id)
    del missing["io.rapidship.gpu.archs"]
    report = check_labels(missing, v)
    assert not report.passed
    assert report.reasons == ["label io.rapidship.gpu.archs is None, expected '80,90'"]
    wrong = good_labels(v.id) | {"io.rapidship.gpu.archs": "all"}
    assert check_labels(wrong, v).reasons == ["label io.rapidship.gpu.archs is 'all', expected '80,90'"]
    unpruned = v.model_copy(update={"gpu_archs": None})
    assert check_labels(wrong, unpruned).passed


def test_labels_gate_still_checks_the_rest():
    v = MATRIX.variants["cpu-debian12"]
    labels = good_labels(v.id) | {"io.rapidship.lock.sha256": "unlocked"}
    del labels["org.opencontainers.image.licenses"]
    reasons = check_labels(labels, v).reasons
    assert "missing label org.opencontainers.image.licenses" in reasons
    assert any("built without a lock" in r for r in reasons)
    assert not check_labels(None, v).passed


def test_with_a_fleet_per_arch_each_image_must_name_its_own_arch_list():
    v = MATRIX.variants["cuda12-debian12"].model_copy(update={"gpu_archs": None,
                                                             "gpu_archs_by_arch": {"amd64": (80, 90), "arm64": (90, 121)}})
    base = {key: "x" for key in OCI_REQUIRED} | expected_labels(v, "arm64") | {"io.rapidship.lock.sha256": "0" * 64}
    assert base["io.rapidship.gpu.archs"] == "90,121" and check_labels(base, v, arch="arm64").passed
    # the arm64 image's label on the amd64 image (or no arch given) is refused
    assert check_labels(base, v, arch="amd64").reasons == ["label io.rapidship.gpu.archs is '90,121', expected '80,90'"]
    assert not check_labels(base, v).passed
