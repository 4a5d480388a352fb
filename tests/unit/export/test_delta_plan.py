"""export/delta.py's plan and repack's plan with a host archive: which layers a delta leaves off,
which base it must extend, and that a layer is taken from the host only by its content hash."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest

from rapidship.errors import ConfigError
from rapidship.export import repack
from rapidship.export.delta import plan_delta

L = {k: "sha256:" + hashlib.sha256(k.encode()).hexdigest() for k in ("os", "cuda", "rapids", "py", "py2", "x")}


def _image(ref: str, layers: list[str], arch: str = "amd64", variant: str = "") -> dict:
    return {"ref": ref, "image_id": "sha256:" + hashlib.sha256(ref.encode()).hexdigest(), "arch": arch,
            "variant": variant, "layers": [L[k] for k in layers]}


PREVIOUS = [_image("r/rapids:26.10-amd64", ["os", "cuda", "rapids", "py"], variant="cuda12-debian12"),
            _image("r/rapids:26.10-arm64", ["os", "cuda", "rapids", "py"], "arm64", "cuda12-debian12")]


def test_a_patch_release_expects_the_shared_layers_on_the_host():
    new = [_image("r/rapids:26.10.1-amd64", ["os", "cuda", "rapids", "py2"], variant="cuda12-debian12")]
    delta = plan_delta(new, "e" * 32, "2026-12-01T00:00:00+00:00", PREVIOUS)
    assert delta.extends["export_id"] == "e" * 32 and delta.extends["created"] == "2026-12-01T00:00:00+00:00"
    assert delta.extends["layers"] == sorted([L["os"], L["cuda"], L["rapids"]])
    assert L["py2"] not in delta.held and L["py"] in delta.held
    assert [i["ref"] for i in delta.extends["images"]] == [p["ref"] for p in PREVIOUS]


def test_a_base_of_other_images_or_sharing_nothing_is_refused():
    with pytest.raises(ConfigError, match="not a base of this release: r/other:1 .* has no image of r/other") as err:
        plan_delta([_image("r/other:1", ["os"])], "e", "t", PREVIOUS)
    assert err.value.where == "--since"
    with pytest.raises(ConfigError, match="shares no layer with the previous release's r/rapids:26.10-amd64"):
        plan_delta([_image("r/rapids:27.02-amd64", ["x"], variant="cuda12-debian12")], "e", "t", PREVIOUS)
    with pytest.raises(ConfigError, match="has no image of cuda12-debian12 for ppc64le"):
        plan_delta([_image("r/rapids:26.10-ppc", ["os"], "ppc64le", "cuda12-debian12")], "e", "t", PREVIOUS)


def _archive(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_a_layer_the_disc_lacks_is_taken_from_the_host_by_its_hash_only():
    layers = {k: f"layer {k}".encode() * 100 for k in ("a", "b")}
    diff = {k: "sha256:" + hashlib.sha256(v).hexdigest() for k, v in layers.items()}
    config = json.dumps({"rootfs": {"type": "layers", "diff_ids": [diff["a"], diff["b"]]}}).encode()
    image_id = "sha256:" + hashlib.sha256(config).hexdigest()
    disc = _archive({"c.json": config, "b/layer.tar": layers["b"]})
    host = _archive({"whatever/layer.tar": layers["a"], "decoy/layer.tar": b"not it"})
    wanted = [repack.Wanted(image_id, ("r/app:2",), "r/app:2")]
    found = repack.scan(io.BytesIO(disc), {image_id})
    plan, problems = repack.plan(found, wanted)
    assert problems and repack.missing_layers(found, wanted) == {diff["a"]}
    plan, problems = repack.plan(found, wanted, repack.scan(io.BytesIO(host), set()))
    assert problems == [] and list(plan.held_take.values()) == [diff["a"][7:]]
    out = io.BytesIO()
    repack.write(io.BytesIO(disc), plan, out, held=lambda: _opened(host))
    with tarfile.open(fileobj=io.BytesIO(out.getvalue())) as tar:
        assert tar.extractfile(f"blobs/sha256/{diff['a'][7:]}").read() == layers["a"]
        assert json.loads(tar.extractfile("manifest.json").read())[0]["Layers"] == [
            f"blobs/sha256/{diff['a'][7:]}", f"blobs/sha256/{diff['b'][7:]}"]
    # the host's archive changed between the passes: the output ends in a block no reader accepts
    changed = _archive({"whatever/layer.tar": b"X" * len(layers["a"])})
    with pytest.raises(repack.Changed):
        repack.write(io.BytesIO(disc), plan, io.BytesIO(), held=lambda: _opened(changed))


class _opened:
    def __init__(self, data: bytes) -> None:
        self.stream = io.BytesIO(data)

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc) -> None:
        return None
