"""The smoke stage: rapids-smoke spill in the image with the hardened profile, its record written."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rapidship import console
from rapidship.config.matrix import load_matrix
from rapidship.records import Workspace


def smoke(variant="cpu-debian12", arch=None, mode="cpu", memory="1g", shm_size="256m", uid=None, gpus=None, data=None,
          spill_mount=True, spill_owner=None, env=None, image=None, out="build/smoke", variants_file="variants.yaml"):
    """Run rapids-smoke spill in the image; fail on no spill, wrong result or OOM kill (its record says which)."""
    from rapidship.imagebuild.base import host_arch

    from rapidship.smoke.run import env_pairs, built_image, host_memlock, memlock_for, pick_uid, plan_smoke, raise_on_failure, smoke as run_smoke, write_record

    v = load_matrix(variants_file).get(variant)
    pairs = env_pairs(env)
    args = ("--data-bytes", data) if data else ()
    a = arch or host_arch()
    plan = plan_smoke(v, a, mode, pick_uid(uid, v.uid), memory, shm_size, gpus,
                      Path(out).resolve() / "spill" if spill_mount else None,
                      spill_owner, pairs, args,
                      image=image or built_image(Workspace(), v.id, a))
    memlock, notes = memlock_for(mode, *host_memlock())
    plan = replace(plan, memlock=memlock, notes=notes)
    for note in notes:
        console.err.print(f"[yellow]note:[/] {note}")
    with console.status(f"smoke {plan.ref} ({mode}, uid {plan.uid}, --memory {memory})"):
        result = run_smoke(plan)
    record = write_record(result, Path(out))
    report = result.report or {}
    for stage in report.get("stages", []):
        tiers = ", ".join(f"{t['name']} {t['keys']} keys/{t['bytes'] / 2**20:.0f} MiB" for t in stage["tiers"])
        console.err.print(f"{stage['name']}: {stage['data_bytes'] / 2**20:.0f} MiB -> {tiers}; "
                          f"{stage['spill_files']} spill files, {stage['spill_file_bytes'] / 2**20:.0f} MiB; "
                          f"result {'ok' if stage['result_ok'] else ('WRONG' if not stage['error'] else 'none: ' + stage['error'][:60])}; "
                          f"{seconds_text(stage['seconds'])}")
    console.err.print(f"{result.verdict} in {result.seconds}s (exit {result.exit_code}, OOMKilled {result.oom_killed}) "
                      f"-> {record}")
    raise_on_failure(result, record)


def seconds_text(seconds) -> str:
    """{'persist': 10.97, 'total': 44.3} -> 'persist 11.0 s, total 44.3 s' (a bare number: '44.3 s')."""
    if isinstance(seconds, dict):
        return ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items() if isinstance(v, (int, float))) or "-"
    return f"{seconds:.1f} s" if isinstance(seconds, (int, float)) else "-"
