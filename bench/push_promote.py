"""Push vs re-push vs promote of a real variant image to a local TLS registry, side by side.

Usage: python bench/push_promote.py [IMAGE_REF]   (default rapidship/dask:26.10-cpu-debian12-py3.11-amd64,
made by `invoke build --variant cpu-debian12 --arch amd64`). Starts docker-registry on 127.0.0.1 with
TLS + htpasswd (tests/registry_fixtures.py), and stops it at the end. Prints seconds and ratios.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from registry_fixtures import RegistryServer  # noqa: E402
from rapidship.config.matrix import parse_matrix  # noqa: E402
from rapidship.publish.oci import Credentials  # noqa: E402
from rapidship.records import GatesRecord, ScanRecord  # noqa: E402
from rapidship.records import Workspace  # noqa: E402
from rapidship.publish.push import promote, push  # noqa: E402

ref = sys.argv[1] if len(sys.argv) > 1 else "rapidship/dask:26.10-cpu-debian12-py3.11-amd64"
image, tag = ref.rsplit(":", 1)
size = int(subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", ref], capture_output=True, text=True,
                          check=True).stdout)
text = (ROOT / "variants.yaml").read_text()
with tempfile.TemporaryDirectory() as tmp_name:
    tmp = Path(tmp_name)
    # a one-arch copy of the matrix whose cpu-debian12 variant is the image under test
    doc = text.replace("    image: rapidship/dask", f"    image: {image}\n    arches: [amd64]")
    variant = parse_matrix(doc).get("cpu-debian12")
    assert variant.ref("amd64") == ref, f"{variant.ref('amd64')} != {ref}"
    out = Workspace(tmp / "build")  # passing records, as `invoke gates` and `invoke scan` write them
    out.save(out.gates(variant.id, "amd64"), GatesRecord(ref=ref, image_id="", arch="amd64", passed=True, gates=[]))
    out.save(out.decision(variant.id, "amd64"), ScanRecord(
        artifact=ref, variant=variant.id, arch="amd64", passed=True, reasons=[], notes=[], counts={}, policy={},
        os="", packages=0, trivy_version="", db={}, outputs={}, seconds=0.0, decided_on=""))
    reg = RegistryServer(tmp).start()
    try:
        creds = Credentials(reg.user, reg.password, "bench")
        t = time.monotonic()
        record = push(variant, f"{reg.host}/staging", out, creds, str(reg.ca))
        first = time.monotonic() - t
        t = time.monotonic()
        push(variant, f"{reg.host}/staging", out, creds, str(reg.ca))
        again = time.monotonic() - t
        t = time.monotonic()
        done = promote(record, f"{reg.host}/release", creds, str(reg.ca))
        prom = time.monotonic() - t
    finally:
        reg.stop()
print(f"image {ref}: {size / 1e6:.0f} MB uncompressed")
print(f"push (skopeo, blobs compressed and uploaded): {first:.1f} s ({size / 1e6 / first:.0f} MB/s of image)")
print(f"push again (blobs already there):             {again:.1f} s  ratio {again / first:.2f}")
print(f"promote (mount {done.blobs_mounted} blobs, put manifests):  {prom:.2f} s  ratio {prom / first:.3f}")
