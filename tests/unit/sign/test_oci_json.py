"""oci_json: one meaning per document, as a Go client would read it, or a refusal naming why."""

from __future__ import annotations

import json

import pytest

from rapidship import oci_json

D = "sha256:" + "a" * 64
MANIFEST = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": D, "size": 2},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": D, "size": 3}]}
INDEX = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
         "manifests": [{"mediaType": MANIFEST["mediaType"], "digest": D, "size": 9,
                        "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}}]}


def test_what_the_specs_define_passes():
    assert oci_json.parse_manifest(json.dumps(MANIFEST).encode()) == MANIFEST
    assert oci_json.parse_manifest(json.dumps(INDEX).encode()) == INDEX


@pytest.mark.parametrize("text, why", [
    ('{"a": 1, "a": 2}', "key 'a' given twice"),
    ('{"digest": 1, "Digest": 2}', "keys 'digest' and 'Digest' differ only in case"),
    ('[{"x": {"k": 1, "K": 2}}]', "differ only in case"),  # at any depth
    ('{"a": 1', "not JSON"),
])
def test_keys_a_go_decoder_would_fold_are_refused(text, why):
    with pytest.raises(oci_json.Ambiguous, match=why):
        oci_json.parse(text)
    assert oci_json.parse_or_none(text) is None


@pytest.mark.parametrize("edit, why", [
    (lambda d: d | {"extra": 1}, "manifest has field"),
    (lambda d: d | {"config": d["config"] | {"digest": "sha256:AB"}}, "config.digest"),
    (lambda d: d | {"layers": [d["layers"][0] | {"size": "3"}]}, r"layers\[0\].size"),
    (lambda d: d | {"schemaVersion": 1}, "schemaVersion"),
    (lambda d: {k: v for k, v in d.items() if k != "config"}, "config is not a descriptor"),
])
def test_a_manifest_outside_the_spec_is_refused(edit, why):
    with pytest.raises(oci_json.Ambiguous, match=why):
        oci_json.parse_manifest(json.dumps(edit(MANIFEST)).encode())


def test_an_index_child_outside_the_spec_is_refused():
    bent = json.loads(json.dumps(INDEX))
    bent["manifests"][0]["platform"]["cpu"] = "x"
    with pytest.raises(oci_json.Ambiguous, match=r"manifests\[0\].platform has field"):
        oci_json.parse_manifest(json.dumps(bent).encode())
