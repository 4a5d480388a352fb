"""The spill smoke task."""

from __future__ import annotations

from pathlib import Path

from invoke import task

from rapidship import console
from rapidship.cli.options import VARIANTS_HELP, arch_flag, int_flag
from rapidship.config.matrix import load_matrix
from rapidship.errors import exits_cleanly
from rapidship.records import Workspace


@task(iterable=["env"],
      help={"variant": "variant id", "arch": "amd64 or arm64 (default: this machine's)",
            "mode": "cpu (host -> disk), gpu (CuPy device -> host -> disk) or cudf (cuDF + dask-cudf)",
            "memory": "container memory cap, also --memory-swap (default 1g)", "shm-size": "/dev/shm size (default 256m)",
            "uid": "run uid: a number or 'random' (default: the variant's uid)",
            "gpus": "GPUs to pass: all or a device list like 0,1 (needs the NVIDIA container toolkit)",
            "data": "dataset size passed to rapids-smoke --data-bytes (default: 2 x the cap)",
            "spill-mount": "bind-mount a fresh host spill dir (default); --no-spill-mount to test the failure",
            "spill-owner": "owner uid of the host spill dir (default: the run uid; another uid tests the failure)",
            "env": "KEY=VALUE set in the container (repeatable)",
            "image": "image to run (default: the image id in build/<variant>/build-<arch>.json, else the tag)",
            "out": "where records go (default build/smoke)", **VARIANTS_HELP})
@exits_cleanly
def smoke(c, variant="cpu-debian12", arch=None, mode="cpu", memory="1g", shm_size="256m", uid=None, gpus=None,
          data=None, spill_mount=True, spill_owner=None, env=None, image=None, out="build/smoke",
          variants_file="variants.yaml"):
    """Run rapids-smoke spill in the image with the hardened profile; fail on no spill, wrong result or OOM kill."""
    from rapidship.build.base import host_arch
    from dataclasses import replace

    from rapidship.smoke.run import env_pairs, built_image, host_memlock, memlock_for, pick_uid, plan_smoke, raise_on_failure, smoke as run_smoke, write_record

    v = load_matrix(variants_file).get(variant)
    pairs = env_pairs(env)
    args = ("--data-bytes", data) if data else ()
    a = arch_flag(arch or host_arch()).value
    plan = plan_smoke(v, a, mode, pick_uid(uid, v.uid), memory, shm_size, gpus,
                      Path(out).resolve() / "spill" if spill_mount else None,
                      int_flag("--spill-owner", spill_owner) if spill_owner not in (None, "") else None, pairs, args,
                      image=image or built_image(Workspace(), v.id, a))
    memlock, notes = memlock_for(mode, *host_memlock())
    plan = replace(plan, memlock=memlock, notes=notes)
    for note in notes:
        console.err.print(f"[yellow]note:[/] {note}")
    with console.err.status(f"smoke {plan.ref} ({mode}, uid {plan.uid}, --memory {memory})"):
        result = run_smoke(plan)
    record = write_record(result, Path(out))
    report = result.report or {}
    for stage in report.get("stages", []):
        tiers = ", ".join(f"{t['name']} {t['keys']} keys/{t['bytes'] / 2**20:.0f} MiB" for t in stage["tiers"])
        console.err.print(f"{stage['name']}: {stage['data_bytes'] / 2**20:.0f} MiB -> {tiers}; "
                          f"{stage['spill_files']} spill files, {stage['spill_file_bytes'] / 2**20:.0f} MiB; "
                          f"result {'ok' if stage['result_ok'] else ('WRONG' if not stage['error'] else 'none: ' + stage['error'][:60])}; "
                          f"{stage['seconds']}")
    console.err.print(f"{result.verdict} in {result.seconds}s (exit {result.exit_code}, OOMKilled {result.oom_killed}) "
                      f"-> {record}")
    raise_on_failure(result, record)
