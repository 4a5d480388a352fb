"""The build and gates stages: a variant's images for some arches, built with BuildKit; the image gates on them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from rapidship import console
from rapidship.config.matrix import load_matrix
from rapidship.errors import GateFailure
from rapidship.records import Workspace


def build(variant, arches, ca_bundle=None, pip_index=None, conda_channel=None, network=None, no_cache=False,
          variants_file="variants.yaml"):
    """Render and build a variant with BuildKit; writes build/<variant>/build-<arch>.json."""
    from rapidship.imagebuild.buildkit import BuildSecrets, build as build_image, local_base_args, plan_build, write_record
    from rapidship.imagebuild.normalise import source_date_epoch
    from dataclasses import replace

    from rapidship.render.dockerfile import check_locks, render as render_variant

    m = load_matrix(variants_file)
    v = m.get(variant)
    check_locks(v, m)
    secrets = BuildSecrets.from_flags(ca_bundle, pip_index, conda_channel)
    rendered = render_variant(v)
    revision = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    epoch = source_date_epoch(Path.cwd())
    plans = [plan_build(v, a, rendered, secrets, revision, no_cache=no_cache, network=network, epoch=epoch)
             for a in arches]  # flags first
    for a, plan in zip(arches, plans):
        plan = replace(plan, base_args=local_base_args(v, a))  # then the bases, which may be missing
        log = Workspace().build_log(v.id, a.value)
        with console.status(f"building {plan.ref} (log: {log})", detail=lambda: console.last_line(log)) as status:
            built = build_image(plan, secrets, v, log, on_step=lambda s: status.update(f"{plan.ref}: {s}"))
        record = write_record(Workspace(), built)
        console.err.print(f"built {built.ref} (docker build {built.seconds}s): {built.size_bytes / 1e6:.0f} MB, "
                          f"zstd {built.zstd_bytes / 1e6:.0f} MB, {built.layers} layers, "
                          f"{built.cached_steps}/{built.total_steps} steps cached; image id {built.image_id[:19]} "
                          f"(SOURCE_DATE_EPOCH={epoch}) -> {record}")


def gates(variant, arches, ca_bundle=None, pip_index=None, reread=False, variants_file="variants.yaml",
          conda_channel=None):
    """Run the image gates (size, labels, user, suid, secrets) on a built image; writes gates-<arch>.json."""
    from rapidship.imagebuild.buildkit import BuildSecrets, read_record
    from rapidship.gates import figure
    from rapidship.gates.run import run_gates, write_content_record, write_gates_record
    from rapidship.records import Rendered

    v = load_matrix(variants_file).get(variant)
    secrets = BuildSecrets.from_flags(ca_bundle, pip_index, conda_channel)  # what the secrets gate looks for
    failed = []
    ws = Workspace()
    rendered = ws.load(ws.render(v.id), Rendered, f"invoke render --variant {v.id}", "render record")
    for a in arches:
        built = read_record(ws, v.id, a.value)
        with console.status(f"gates on {built.ref}") as status:
            reports, content, judged, how = run_gates(v, built, secrets, rendered.lock_sha256,
                                                      on_gate=lambda g: status.update(f"{built.ref}: gate {g}"),
                                                      facts_root=None if reread else ws.root)
        console.table(f"gates {built.ref}", ["gate", "result", "figure / why"],
                      [(r.gate, "PASS" if r.passed else "FAIL", figure(r)) for r in reports])
        console.err.print(f"image {how}; record: {write_gates_record(ws, built, reports, judged, how)}; content manifest "
                          f"{content.digest[:19]} ({content.files:,} files) -> {write_content_record(ws, content)}")
        failed += [f"{a.value}:{r.gate}" for r in reports if not r.passed]
    if failed:
        raise GateFailure(f"gates {variant}", f"failed {', '.join(failed)}",
                          "each failing gate's row above says why; docs/gates.md says what each gate wants")
