"""The gates' read from layer facts is the read `docker export` gives, on real images (real engine).

The build's normaliser notes each layer's facts as it writes it (layerfacts.py); `invoke gates`
then judges the image from them instead of reading it again. These tests hold the two reads side
by side on the built cpu-debian12 image and on images made bad from it (a setuid bit, files
removed by a later layer, a folder made opaque, file capabilities): every entry a gate reads and
the content manifest agree, and the gates say no on the same images for the same reasons.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from rapidship import content, layerfacts
from rapidship.gates.run import read_image
from rapidship.gates.suid import check_suid
from rapidship.image import snapshot
from rapidship.gates.run import secret_hits
from rapidship.gates.secrets import check_secrets
from rapidship.imagebuild.buildkit import BuildSecrets, layer_note
from rapidship.imagebuild.normalise import normalise

pytestmark = pytest.mark.docker
from support.commands import ROOT, invoke  # noqa: E402

# what a container adds that no layer holds: docker export streams them, an image has none
CONTAINER_INIT = {"/dev", "/proc", "/sys", "/etc/hostname", "/etc/hosts", "/etc/resolv.conf", "/etc/mtab",
                  "/dockerenv", "/.dockerenv"}


def both(image_id: str, facts_root) -> tuple:
    """(the read from facts, the read from docker export), each as the gates see it."""
    from_facts, how, _ = read_image(image_id, facts_root)
    assert how.startswith("read from the facts"), how
    return from_facts, snapshot(image_id, hash_under=content.ROOTS)


def entries(image) -> dict:
    """What a gate reads of each entry. The mode's permission bits: Go's tar writer (docker export)
    also puts the file type's bits in the mode field, a layer's tar may not."""
    return {f.path: (f.mode & 0o7777, f.size, f.is_file, f.is_dir, f.capabilities, f.uid, f.gid) for f in image.files
            if f.path not in CONTAINER_INIT and not f.path.startswith(("/dev/", "/proc/", "/sys/"))}


def test_the_built_image_reads_the_same_from_its_facts_as_from_docker_export(cpu_image):
    facts, export = both(cpu_image.image_id, ROOT / "build")
    assert entries(facts) == entries(export)
    assert facts.digests == export.digests and facts.links == export.links and len(facts.digests) > 1000
    got = content.manifest(facts, "cpu-debian12", "amd64", cpu_image.image_id)
    assert got.digest == content.manifest(export, "cpu-debian12", "amd64", cpu_image.image_id).digest


def test_gates_task_reads_the_facts_and_reread_reads_whole(cpu_image):
    record_path = ROOT / "build" / "cpu-debian12" / "gates-amd64.json"
    content_path = ROOT / "build" / "cpu-debian12" / "content-amd64.json"
    invoke("gates", "--variant", "cpu-debian12", "--arch", "amd64")
    record, manifest = json.loads(record_path.read_text()), json.loads(content_path.read_text())
    assert record["passed"] and record["read"].startswith("read from the facts of its")
    invoke("gates", "--variant", "cpu-debian12", "--arch", "amd64", "--reread")
    again = json.loads(record_path.read_text())
    assert again["read"].startswith("read whole (one docker export)")
    def said(r: dict) -> list:  # the user gate tries a new random uid on every run; how the layers were read
        return [(g["gate"], g["passed"], g["reasons"], {k: v for k, v in g["details"].items() if k != "layers_read"}
                 if g["gate"] != "user" else {}) for g in r["gates"]]

    assert said(again) == said(record)
    secrets_first, secrets_again = record["gates"][-1]["details"], again["gates"][-1]["details"]
    if secrets_first["needles"]:  # a machine whose CA bundle holds a private root: the build searched its layers
        assert (secrets_first["layers_read"], secrets_again["layers_read"]) == ("from their facts", "docker save")
    assert json.loads(content_path.read_text())["digest"] == manifest["digest"]


@pytest.fixture
def normalised(engine, cpu_image, unique_name, tmp_path):
    """An image built FROM the good one, normalised with its facts noted into a scratch workspace."""
    made = []

    def _make(lines: str, files: dict[str, bytes] | None = None, secrets: BuildSecrets | None = None) -> str:
        tag = f"{unique_name}:{len(made)}"
        ctx = tmp_path / f"ctx{len(made)}"
        ctx.mkdir()
        for name, data in (files or {}).items():
            (ctx / name).write_bytes(data)
        (ctx / "Dockerfile").write_text(f"FROM {cpu_image.ref}\n{lines}\n")
        subprocess.run(["docker", "build", "-q", "-t", tag, str(ctx)], capture_output=True, check=True)
        made.append(tag)
        return normalise(tag, cpu_image.ref, 946684800, note=layer_note(tmp_path, secrets)).image_id

    yield _make, tmp_path
    for tag in made:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)


def test_a_setuid_bit_added_above_fails_the_gate_from_the_facts(normalised):
    make, root = normalised
    bad = make("USER 0\nRUN chmod u+s /usr/bin/env && chmod g+s /opt/rapids/bin/python3 || chmod g+s /usr/bin/id\n"
               "USER 1001:0")
    facts, export = both(bad, root)
    assert entries(facts) == entries(export)
    report = check_suid(facts)
    assert not report.passed and report.reasons == check_suid(export).reasons
    assert "/usr/bin/env has setuid/setgid" in report.reasons


def test_files_removed_and_a_folder_made_opaque_above_read_as_docker_export_reads_them(normalised):
    make, root = normalised
    changed = make("USER 0\nRUN rm -rf /opt/rapidship/rapids_runtime /usr/bin/id "
                   "&& rm -rf /opt/rapids/include && mkdir /opt/rapids/include && echo new > /opt/rapids/include/new.h\n"
                   "USER 1001:0")
    facts, export = both(changed, root)
    assert entries(facts) == entries(export) and facts.digests == export.digests and facts.links == export.links
    paths = set(entries(facts))
    assert "/usr/bin/id" not in paths and not any(p.startswith("/opt/rapidship/rapids_runtime") for p in paths)
    assert "/opt/rapids/include/new.h" in paths


def test_facts_of_another_layer_are_never_read_for_this_one(normalised, cpu_image):
    make, root = normalised
    bad = make("USER 0\nRUN chmod u+s /usr/bin/env\nUSER 1001:0")
    layers = json.loads(subprocess.run(["docker", "image", "inspect", bad], capture_output=True, text=True,
                                       check=True).stdout)[0]["RootFS"]["Layers"]
    top, below = layerfacts.facts_path(root, layers[-1]), layerfacts.facts_path(root, layers[-2])
    top.write_bytes(below.read_bytes())  # an attacker swaps in facts without the setuid bit
    image, how, _ = read_image(bad, root)
    assert how.startswith("read whole (one docker export)") and "holds the facts of" in how
    assert "/usr/bin/env has setuid/setgid" in check_suid(image).reasons


def test_the_zstd_size_counted_while_normalising_is_what_a_save_through_zstd_gives(cpu_image):
    """The build record's zstd size comes from the archive the normaliser hands docker load, not
    from a second `docker save`: the two agree within half a percent (the save adds JSON per layer)."""
    saved = subprocess.run(f"docker save {cpu_image.image_id} | zstd -T0 -3 -q -c | wc -c", shell=True,
                           capture_output=True, text=True, check=True)
    assert abs(cpu_image.zstd_bytes - int(saved.stdout)) <= 0.005 * int(saved.stdout)


TOKEN_URL = "https://ci-bot:s3cr3t-t0ken-abc@pypi.mirror.example/simple"


def test_a_secret_deleted_by_a_later_layer_is_found_from_the_facts_as_by_reading_every_layer(normalised):
    """The normaliser searched each layer's files for the build's needles as it wrote them; the gate
    reads those hits for the same needles, and reads the layers again for any others."""
    make, root = normalised
    build = BuildSecrets(ca_bundle=None, pip_index=TOKEN_URL, conda_channels=())
    leaked = make("USER 0\nCOPY pip.conf /tmp/pip.conf\nRUN rm /tmp/pip.conf\nUSER 1001:0",
                  {"pip.conf": f"[global]\nindex-url = {TOKEN_URL}\n".encode()}, secrets=build)
    image, _, facts = read_image(leaked, root)
    values = {"pip index URL": TOKEN_URL}
    hits = secret_hits(facts, root, build, values)
    assert hits is not None and any(where.endswith("/tmp/pip.conf") for _, where in hits)
    from_facts = check_secrets(image, None, values, layer_hits=hits)
    read_again = check_secrets(image, None, values)
    assert not from_facts.passed and from_facts.details["layers_read"] == "from their facts"
    assert read_again.details["layers_read"] == "docker save"
    assert [r.split(" found in ")[0] for r in from_facts.reasons] == [r.split(" found in ")[0] for r in read_again.reasons]
    assert all("/tmp/pip.conf" in r for r in from_facts.reasons) and "s3cr3t" not in " ".join(from_facts.reasons)
    # needles the build did not search for: its facts cannot answer, the layers are read
    other = BuildSecrets(ca_bundle=None, pip_index="https://bot:an0ther-t0ken@mirror.example/simple", conda_channels=())
    assert secret_hits(facts, root, other, {"pip index URL": other.pip_index}) is None
    clean = make("USER 0\nRUN true\nUSER 1001:0", secrets=build)
    image, _, facts = read_image(clean, root)
    hits = secret_hits(facts, root, build, values)
    assert hits == [] and check_secrets(image, None, values, layer_hits=hits).passed


def test_the_needles_fingerprint_is_keyed_and_never_the_values(normalised):
    make, root = normalised
    build = BuildSecrets(ca_bundle=None, pip_index=TOKEN_URL, conda_channels=())
    image = make("USER 0\nRUN true\nUSER 1001:0", secrets=build)
    top = json.loads(subprocess.run(["docker", "image", "inspect", image], capture_output=True, text=True,
                                    check=True).stdout)[0]["RootFS"]["Layers"][-1]
    text = layerfacts.facts_path(root, top).read_text()
    assert "s3cr3t" not in text and json.loads(text)["needles"].startswith("hmac-sha256:")
    assert oct(layerfacts.key_path(root).stat().st_mode & 0o777) == "0o600"
