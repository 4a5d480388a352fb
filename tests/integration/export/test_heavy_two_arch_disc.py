"""The full RAPIDS image for both arches, down the whole chain: gates and scan per arch, one signed
index pushed to a real registry on loopback, verify for the index and both children, the release
report with both rows, one export that puts both arches onto ONE DVD-5, export-verify, and import:
`docker load` brings both images (each under its own arch tag; the host runs its own, the other
stays for a registry) and `import --registry` pushes both to a site registry.

Heavy: needs both cuda12-debian12 images built (tests/integration/imagebuild/test_heavy_rapids_pip.py)
and about 20 minutes; never in CI. Run by hand: `python3 -m pytest -m heavy -s tests/integration/export/test_heavy_two_arch_disc.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from support.commands import ROOT

pytestmark = [pytest.mark.heavy, pytest.mark.docker]
VARIANT = "cuda12-debian12"
ARCHES = ("amd64", "arm64")
DVD5 = 4_700_000_000


def sh(env: dict, script: str, timeout: int = 3600) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    proc = subprocess.run(["bash", "-c", "set -eu\n. build/registry/env.sh\n" + script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc, round(time.monotonic() - start, 1)


def test_both_arches_one_signed_index_one_dvd(engine, tmp_path):
    env = dict(os.environ, RAPIDSHIP_SIGNING_PASSWORD="two-arch-disc-only")
    subprocess.run(["invoke", "registry.up"], cwd=ROOT, check=True, capture_output=True)
    keys, disc = tmp_path / "keys", tmp_path / "disc"
    seconds = {}
    try:
        for arch in ARCHES:
            _, seconds[f"gates {arch}"] = sh(env, f"invoke gates --variant {VARIANT} --arch {arch}")
        sh(env, "invoke trivy-db --advisories docs/examples/quickstart-advisories.yaml --cache-dir build/trivy-cache")
        for arch in ARCHES:
            _, seconds[f"scan {arch}"] = sh(env, f"invoke scan --variant {VARIANT} --arch {arch} "
                                                 "--cache-dir build/trivy-cache --skip-db-update --offline-scan")
        sh(env, f"invoke keys.generate --out {keys}")
        _, seconds["push + sign (both)"] = sh(env, f'invoke push --variant {VARIANT} --registry "$RAPIDSHIP_REGISTRY/staging" '
                                                    f"--key {keys}/cosign.key")
        pushed = json.loads((ROOT / "build" / VARIANT / "push.json").read_text())
        assert set(pushed["arches"]) == set(ARCHES) and not pushed["gates_skipped"]
        verified, _ = sh(env, f"invoke verify --variant {VARIANT} --key {keys}/cosign.pub --policy policy/trivy.yaml")
        assert verified.stdout.count('"passed": true') >= 1 and "FAIL" not in verified.stdout
        report, _ = sh(env, "invoke report --out " + str(tmp_path / "report"))
        rows = json.loads((tmp_path / "report" / "report.json").read_text())["rows"]
        assert {(r["variant"], r["arch"]) for r in rows} >= {(VARIANT, a) for a in ARCHES}

        _, seconds["export (both arches)"] = sh(env, f"invoke export --variant {VARIANT} --out {disc}")
        volumes = sorted(disc.glob("*.iso"))
        total = sum(v.stat().st_size for v in volumes)
        assert len(volumes) == 1 and total <= DVD5, f"{len(volumes)} volumes, {total:,} bytes"
        record = json.loads((disc / "export.json").read_text())
        assert sorted(i["arch"] for i in record["images"]) == list(ARCHES) and record["signing_key_fingerprint"]
        _, seconds["export-verify"] = sh(env, f"invoke export-verify --from {volumes[0]} --key {keys}/cosign.pub")
        loaded, seconds["import (docker load)"] = sh(env, f"invoke import --from {volumes[0]} --key {keys}/cosign.pub --json")
        ids = {i["arch"]: i["image_id"] for i in record["images"]}
        for proc, where in ((loaded, "engine"), (None, "registry")):
            if proc is None:
                proc, seconds["import --registry"] = sh(
                    env, f'invoke import --from {volumes[0]} --key {keys}/cosign.pub --json --registry "$RAPIDSHIP_REGISTRY/site"')
            report = json.loads(proc.stdout[proc.stdout.rindex('{\n  "export_id"'):])
            got = sorted((x["ref"].rsplit("-", 1)[-1], x["image_id"]) for x in report["loaded"])
            assert got == sorted(ids.items()), (where, got)  # both arches, each by its own tag, ids as exported
            assert report["verification"] == "signatures"
        print(f"\ntwo-arch disc: 1 volume, {total:,} bytes of {DVD5:,}")
        for step, took in seconds.items():
            print(f"  {step}: {took} s")
    finally:
        subprocess.run(["invoke", "registry.down"], cwd=ROOT, capture_output=True)
