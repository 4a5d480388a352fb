"""What the engine and the registry hold after a load is exactly what the verifier reported, or nothing.

Each case is a disc a courier who holds no key can make from the genuine one (tests/support/
signed_discs.py): the genuine signatures, the genuine images' bytes, and an archive rewritten to
redirect whoever reads its names and JSON: a `blobs` symlink to the courier's directory, keys in
another case or Unicode folding (`repotags`, `RepoTagſ`), a nested object before RepoTags, entries
and members given twice, an index.json naming the courier's image, a hard link, a `repositories`
file. MANIFEST.json, SHA256SUMS and install.sh are made consistent again, as the courier would.

Through the real engine (`invoke import --key`, `sh install.sh --key`) and the real loopback registry
(`--registry`): the site's own tags (stand-ins for `bank/payments:prod` and the Debian base, made
here under a unique name) keep their images, the courier's image is never created, and the signed
refs hold the signed ids, as the import reported them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
import uuid

import pytest

from rapidship.export.load import scratch_registry
from support.signed_discs import (ARCHES, copy_dirs, error_of, forge, from_args, image_id, install, load_image, ok,
                                  reseal, run, saved_tar)

pytestmark = pytest.mark.docker


def members_of(archive: bytes) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    source = tarfile.open(fileobj=io.BytesIO(archive))
    return [(m, source.extractfile(m).read() if m.isfile() else None) for m in source]


def rebuilt(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def link(name: str, target: str, hard: bool = False) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = (tarfile.LNKTYPE if hard else tarfile.SYMTYPE), target
    return info, None


@pytest.fixture(scope="module")
def site(signed):
    """The site's own tags, each on an image of its own (kept for the module: `absent` removes only
    the disc's images), and the courier's image, as config and layer bytes only."""
    prefix = f"rapidship-test-{uuid.uuid4().hex[:10]}"
    tags = {"payments": f"{prefix}/bank-payments:prod", "base": f"{prefix}/debian:12"}
    ids = {name: load_image(tag, "amd64", os.urandom(4096)) for name, tag in tags.items()}
    evil_tag = f"{prefix}/courier:evil"
    evil = load_image(evil_tag, "amd64", b"#!/bin/sh\necho the courier's code\n")
    theirs = tarfile.open(fileobj=io.BytesIO(saved_tar(evil_tag)))
    entry = json.loads(theirs.extractfile("manifest.json").read())[0]
    config, layer = theirs.extractfile(entry["Config"]).read(), theirs.extractfile(entry["Layers"][0]).read()
    subprocess.run(["docker", "rmi", evil_tag], capture_output=True, check=True)
    yield {"tags": tags, "ids": ids, "evil": evil, "config": config, "layer": layer}
    subprocess.run(["docker", "rmi", "-f", *ids.values(), evil], capture_output=True)


def tricks(signed, site) -> dict[str, bytes]:
    genuine = signed.saved.read_bytes()
    members = members_of(genuine)
    manifest = json.loads(next(d for m, d in members if m.name == "manifest.json"))
    without = [(m, d) for m, d in members if m.name != "manifest.json"]
    evil_hex = site["evil"][7:]
    site_tags = list(site["tags"].values())
    evil_entry = {"Config": f"blobs/sha256/{evil_hex}", "RepoTags": [signed.refs["amd64"]],
                  "Layers": ["courier/layer.tar"]}
    courier = [file(f"elsewhere/sha256/{evil_hex}", site["config"]), file("courier/layer.tar", site["layer"]),
               file(f"{evil_hex}.json", site["config"])]
    raw = lambda text: [file("manifest.json", text.encode())]  # noqa: E731
    first = json.dumps(manifest[0])[1:-1]
    rest = "".join("," + json.dumps(e) for e in manifest[1:])
    oci = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": site["evil"],
                                 "size": len(site["config"])},
                      "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "size": len(site["layer"]),
                                  "digest": "sha256:" + hashlib.sha256(site["layer"]).hexdigest()}]})
    oci_hex = hashlib.sha256(oci.encode()).hexdigest()
    index = json.dumps({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                                           "digest": "sha256:" + oci_hex, "size": len(oci),
                                                           "annotations": {"io.containerd.image.name": site_tags[0]}}]})
    return {
        "blobs-symlink": rebuilt(without + courier + raw(json.dumps(manifest + [evil_entry]))
                                 + [link("blobs", "elsewhere")]),
        "repotags-lower-case": rebuilt(without + raw(json.dumps([dict(manifest[0], repotags=site_tags)] + manifest[1:]))),
        "repotag-long-s": rebuilt(without + raw('[{' + first + ',"RepoTag\\u017f":' + json.dumps(site_tags) + '}'
                                                + rest + ']')),
        "nested-object-first": rebuilt(without + raw('[{"LayerSources":{"sha256:x":{"RepoTags":[]}},' + first + '}'
                                                     + rest + ']')),
        "entry-twice": rebuilt(without + raw(json.dumps(manifest + [dict(manifest[0], RepoTags=site_tags)]))),
        "manifest-twice": rebuilt(members + courier + [file("./manifest.json", json.dumps([evil_entry]).encode())]),
        "index-json": rebuilt(members + courier + [file(f"blobs/sha256/{oci_hex}", oci.encode()),
                                                   file(f"blobs/sha256/{evil_hex}", site["config"]),
                                                   file("index.json", index.encode())]),
        "hard-link-layer": rebuilt(members + courier + [link("hard/layer.tar", "courier/layer.tar", hard=True)]),
        "repositories": rebuilt(members + [file("repositories", json.dumps(
            {site_tags[1].rsplit(":", 1)[0]: {"12": evil_hex}}).encode())] + courier),
    }


def engine_state(signed, site) -> dict[str, str | None]:
    """What a test can see of the engine: every tag it cares about, and whether the courier's image is."""
    names = [*signed.refs.values(), *site["tags"].values()]
    return {**{n: image_id(n) for n in names}, "courier image": image_id(site["evil"])}


def expected(signed, site) -> dict[str, str | None]:
    return {**{signed.refs[a]: signed.ids[a] for a in ARCHES}, **{site["tags"][k]: site["ids"][k] for k in site["tags"]},
            "courier image": None}


CASES = ["blobs-symlink", "repotags-lower-case", "repotag-long-s", "nested-object-first", "entry-twice",
         "manifest-twice", "index-json", "hard-link-layer", "repositories"]


@pytest.mark.parametrize("case", CASES)
def test_invoke_import_loads_exactly_the_signed_images_whatever_the_archive_says(signed, site, absent, case, tmp_path):
    dirs = forge(signed, tricks(signed, site)[case], tmp_path)
    proc = run(signed.env, "import", *from_args(dirs), "--key", str(signed.pub), "--json")
    assert engine_state(signed, site) == expected(signed, site), proc.stderr[-2000:]
    reported = {x["ref"]: x["image_id"] for x in json.loads(ok(proc).stdout)["loaded"]}
    assert reported == {signed.refs[a]: signed.ids[a] for a in ARCHES}
    said = " ".join(proc.stderr.split())
    assert "other members of the disc's archive (docker save's folders, per-layer json" in said


@pytest.mark.parametrize("case", CASES)
def test_install_sh_loads_exactly_the_signed_images_whatever_the_archive_says(signed, site, absent, case, tmp_path):
    dirs = forge(signed, tricks(signed, site)[case], tmp_path)
    proc = install(signed, dirs, "--key", str(signed.pub))
    assert engine_state(signed, site) == expected(signed, site), proc.stderr[-2000:]
    assert proc.returncode == 0, proc.stderr
    assert sorted(line for line in proc.stdout.splitlines() if line.startswith("loaded ")) == sorted(
        f"loaded {signed.refs[a]} {signed.ids[a]}" for a in ARCHES)


def tags_in(registry: str) -> dict[str, list[str]]:
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    out = {}
    with opener.open(f"http://{registry}/v2/_catalog", timeout=5) as resp:
        repos = json.loads(resp.read())["repositories"]
    for repo in repos:
        with opener.open(f"http://{registry}/v2/{repo}/tags/list", timeout=5) as resp:
            out[repo] = sorted(json.loads(resp.read())["tags"] or [])
    return out


@pytest.mark.parametrize("case", ["blobs-symlink", "repotag-long-s", "index-json"])
def test_a_registry_gets_exactly_the_signed_images_from_both_importers(signed, site, case, tmp_path):
    dirs = forge(signed, tricks(signed, site)[case], tmp_path)
    want = {signed.refs["amd64"].rsplit(":", 1)[0]: sorted(r.rsplit(":", 1)[1] for r in signed.refs.values())}
    with scratch_registry(tmp_path) as registry:
        proc = ok(run(signed.env, "import", *from_args(dirs), "--key", str(signed.pub), "--registry", registry,
                      "--insecure", "--work", str(tmp_path), "--json"))
        assert {x["image_id"] for x in json.loads(proc.stdout)["loaded"]} == set(signed.ids.values())
        assert tags_in(registry) == want
    with scratch_registry(tmp_path) as registry:
        proc = install(signed, dirs, "--key", str(signed.pub), "--registry", registry, "--insecure")
        assert proc.returncode == 0, proc.stderr
        assert tags_in(registry) == want


def test_export_verify_checks_what_import_loads_and_a_refused_disc_changes_nothing(signed, site, absent, tmp_path):
    dirs = forge(signed, tricks(signed, site)["blobs-symlink"], tmp_path / "ok")
    report = json.loads(ok(run(signed.env, "export-verify", *from_args(dirs), "--key", str(signed.pub),
                               "--work", str(tmp_path), "--json")).stdout)
    assert {x["image_id"] for x in report["verified"]} == set(signed.ids.values())
    # the courier's archive without the genuine arm64 image: refused by both, and the engine unchanged
    genuine = members_of(signed.saved.read_bytes())
    entries = json.loads(next(d for m, d in genuine if m.name == "manifest.json"))
    arm64 = next(e for e in entries if signed.refs["arm64"] in e["RepoTags"])
    dropped = rebuilt([(m, d) for m, d in genuine if m.name not in (arm64["Config"], *arm64["Layers"])])
    bad = forge(signed, dropped, tmp_path / "bad")
    before = engine_state(signed, site)
    proc = run(signed.env, "import", *from_args(bad), "--key", str(signed.pub))
    assert proc.returncode == 1 and "holds no config that hashes to" in error_of(proc)
    assert install(signed, bad, "--key", str(signed.pub)).returncode == 1
    assert engine_state(signed, site) == before


def test_no_verify_loads_only_what_manifest_json_lists_and_checks_every_id_before_pushing(signed, site, tmp_path):
    """--no-verify trusts the disc's record, not its archive: an id the archive does not hold is
    refused before anything reaches the registry."""
    swapped = copy_dirs(signed.dirs, tmp_path / "disc")
    from rapidship.export.write import manifest_text

    for volume in swapped:
        doc = json.loads((volume / "MANIFEST.json").read_text())
        for image in doc["images"]:
            if image["image_id"] == signed.ids["arm64"]:
                image["image_id"] = site["evil"]
        (volume / "MANIFEST.json").write_text(manifest_text(doc))
        reseal(volume)
    with scratch_registry(tmp_path) as registry:
        proc = run(signed.env, "import", *from_args(swapped), "--no-verify", "--registry", registry, "--insecure",
                   "--work", str(tmp_path))
        message = error_of(proc)
        assert proc.returncode == 1 and signed.refs["arm64"] in message and "holds no config that hashes to" in message
        assert tags_in(registry) == {}


def test_a_loader_given_an_archive_that_changed_midway_creates_nothing(signed, absent, tmp_path):
    """The second pass reads what the first planned, or poisons the stream before manifest.json:
    the real `docker load` then fails and no image exists."""
    from rapidship.engine import ENGINE
    from rapidship.export import repack

    genuine = signed.saved.read_bytes()
    wanted = [repack.Wanted(signed.ids[a], (signed.refs[a],), a) for a in ARCHES]
    plan, problems = repack.plan(repack.scan(io.BytesIO(genuine), {w.image_id for w in wanted}), wanted)
    assert problems == []
    layer = next(m for i, m in enumerate(tarfile.open(fileobj=io.BytesIO(genuine))) if i in plan.take)
    changed = bytearray(genuine)
    changed[layer.offset_data + layer.size // 2] ^= 0xFF  # a byte inside a planned layer
    load = ENGINE.load()
    with pytest.raises(repack.Changed):
        repack.write(io.BytesIO(bytes(changed)), plan, load.stdin)
    load.stdin.close()
    said = load.stdout.read().decode()
    assert load.wait() != 0, said
    assert signed.nothing_loaded()
