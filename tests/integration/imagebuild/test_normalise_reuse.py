"""A rebuild leaves the layers the normaliser made before to the engine (real engine).

The normaliser keeps, per built layer (by its diff_id, its step and the normaliser's own code),
what it made of it: the normalised layers and their zstd sizes. A layer it made before whose chain
the engine holds and whose facts are kept is named in the loader's manifest and not written; the
loader takes it from its store by chain ID. The image id, the zstd size and the gates' read must
come out as they did when every layer was written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from rapidship.engine import ENGINE
from rapidship.image import chain_ids
from rapidship.imagebuild.buildkit import layer_note, read_record
from rapidship.imagebuild.normalise import _held, normalise
from rapidship.records import Workspace

pytestmark = pytest.mark.docker
from support.commands import ROOT, invoke  # noqa: E402


def test_a_rebuild_of_the_same_commit_writes_no_layer_again_and_gives_the_same_image(cpu_image):
    invoke("build", "--variant", "cpu-debian12", "--arch", "amd64")
    again = read_record(Workspace(ROOT / "build"), "cpu-debian12", "amd64")
    normalised = again.extra["normalised"]
    assert again.image_id == cpu_image.image_id and again.zstd_bytes == cpu_image.zstd_bytes
    built = cpu_image.extra["normalised"]["layers_rewritten"] + cpu_image.extra["normalised"]["layers_reused"]
    assert normalised["layers_rewritten"] == 0 and normalised["layers_reused"] == built > 0  # every built layer
    invoke("gates", "--variant", "cpu-debian12", "--arch", "amd64")
    gates = json.loads((ROOT / "build" / "cpu-debian12" / "gates-amd64.json").read_text())
    assert gates["passed"] and gates["read"].startswith("read from the facts")


def test_without_its_facts_or_its_records_a_layer_is_written_again(engine, cpu_image, unique_name, tmp_path):
    """A scratch workspace that made the layers once: with its facts gone, or its records of what
    it made corrupt, the layers are written again and the image is the same."""
    tag = f"{unique_name}:x"

    def build() -> None:  # BuildKit: the rebuild takes the step from its cache, the same layer as before
        subprocess.run([ENGINE.buildkit_cli(), "build", "-q", "-t", tag, "-"], input=f"FROM {cpu_image.ref}\nRUN echo x > /tmp/marker\n",
                       text=True, capture_output=True, check=True, env={**os.environ, "DOCKER_BUILDKIT": "1"})

    build()
    try:
        first = normalise(tag, cpu_image.ref, 946684800, note=layer_note(tmp_path))
        assert first.rewritten_layers == 1 and first.reused_layers == 0
        subprocess.run(["docker", "tag", first.image_id, f"{tag}-keep"], check=True)  # holds the chain once tag moves
        build()
        second = normalise(tag, cpu_image.ref, 946684800, note=layer_note(tmp_path))
        assert (second.image_id, second.reused_layers, second.rewritten_layers) == (first.image_id, 1, 0)
        shutil.rmtree(tmp_path / "layers")
        third = normalise(tag, cpu_image.ref, 946684800, note=layer_note(tmp_path))
        assert (third.image_id, third.reused_layers, third.rewritten_layers) == (first.image_id, 0, 1)
        for made in (tmp_path / "layers").glob("from-*.json"):
            made.write_text("{not json")
        fourth = normalise(tag, cpu_image.ref, 946684800, note=layer_note(tmp_path))
        assert (fourth.image_id, fourth.reused_layers) == (first.image_id, 0)
    finally:
        subprocess.run(["docker", "rmi", "-f", tag, f"{tag}-keep"], capture_output=True, check=False)


def test_a_layer_is_left_to_the_engine_only_where_it_holds_the_chain():
    a, b, c = (f"sha256:{n:064x}" for n in (1, 2, 3))
    held = frozenset(chain_ids([a, b]))
    assert _held([a], [b], held) and not _held([a], [c], held) and not _held([c], [b], held)
