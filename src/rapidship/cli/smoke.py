"""The spill smoke task."""

from __future__ import annotations

from pathlib import Path

from rapidship.cli.options import task

from rapidship import console
from rapidship.cli.options import VARIANTS_HELP, arch_flag, int_flag
from rapidship.config.matrix import load_matrix
from rapidship.errors import exits_cleanly
from rapidship.records import Workspace
from rapidship.stages.smoke import seconds_text


@task(iterable=["env"],
      help={"variant": "variant id", "arch": "amd64 or arm64 (default: this machine's)",
            "mode": "cpu (host -> disk), gpu (CuPy device -> host -> disk) or cudf (cuDF + dask-cudf)",
            "memory": "container memory cap, also --memory-swap (default 1g)", "shm-size": "/dev/shm size (default 256m)",
            "uid": "run uid: a number or 'random' (default: the variant's uid)",
            "gpus": "GPUs to pass: all or a device list like 0,1 (needs the NVIDIA container toolkit)",
            "data": "dataset size: rapids-smoke --data-bytes (default 2 x the cap); --cluster: the job's array "
                    "(default N x --memory-limit: each worker holds its whole limit, twice one worker's for 2 workers)",
            "spill-mount": "bind-mount a fresh host spill dir (default); --no-spill-mount to test the failure",
            "spill-owner": "owner uid of the host spill dir (default: the run uid; another uid tests the failure)",
            "env": "KEY=VALUE set in the container (repeatable)",
            "image": "image to run (default: the image id in build/<variant>/build-<arch>.json, else the tag)",
            "out": "where records go (default build/smoke)",
            "cluster": "N: a scheduler and N worker containers (--memory each) on an internal network run a job that "
                       "spills on every worker and shuffles between them (docs/cluster.md)",
            "memory-limit": "--cluster: each worker's dask --memory-limit (default: the doctor's, --memory less headroom)",
            "kill-worker": "--cluster: docker-kill one worker mid-shuffle; the job must finish exactly on the others "
                           "or fail with a clear reason",
            "timeout": "--cluster: seconds the whole job may take before everything is stopped (default 900)",
            "metrics": "--cluster: every worker serves /metrics with the container's views (on the internal network "
                       "only); the smoke scrapes them and records each series' highest and last value",
            "metrics-targets": "--cluster --metrics: write Prometheus file_sd JSON naming every /metrics endpoint "
                               "here, for a Prometheus on this machine (docs/monitoring.md)",
            "metrics-linger": "--metrics-targets: after the job, keep the cluster up until that Prometheus has "
                              "scraped every worker's end values, at most this many seconds (default 60)",
            **VARIANTS_HELP})
@exits_cleanly
def smoke(c, variant="cpu-debian12", arch=None, mode="cpu", memory="1g", shm_size="256m", uid=None, gpus=None,
          data=None, spill_mount=True, spill_owner=None, env=None, image=None, out="build/smoke",
          variants_file="variants.yaml", cluster=None, memory_limit=None, kill_worker=False, timeout=None,
          metrics=False, metrics_targets=None, metrics_linger=None):
    """Run rapids-smoke spill in the image with the hardened profile; fail on no spill, wrong result or OOM kill."""
    if cluster not in (None, ""):
        return _cluster(variant, arch, mode, memory, shm_size, uid, gpus, data, spill_mount, spill_owner, env, image,
                        out, variants_file, cluster, memory_limit, kill_worker, timeout, metrics, metrics_targets,
                        metrics_linger)
    for flag, value in (("--memory-limit", memory_limit), ("--kill-worker", kill_worker), ("--timeout", timeout),
                        ("--metrics", metrics), ("--metrics-targets", metrics_targets),
                        ("--metrics-linger", metrics_linger)):
        if value not in (None, "", False):
            from rapidship.errors import ConfigError
            raise ConfigError(flag, "applies to the cluster smoke only", "add --cluster N, or leave it out")

    from rapidship.stages.smoke import smoke as smoke_stage

    smoke_stage(variant, arch_flag(arch).value if arch else None, mode, memory, shm_size, uid, gpus, data, spill_mount,
                int_flag("--spill-owner", spill_owner) if spill_owner not in (None, "") else None, env, image, out,
                variants_file)


def _cluster(variant, arch, mode, memory, shm_size, uid, gpus, data, spill_mount, spill_owner, env, image, out,
             variants_file, workers, memory_limit, kill_worker, timeout, metrics=False, metrics_targets=None,
             metrics_linger=None):
    """invoke smoke --cluster N: the multi-container smoke (smoke/cluster.py)."""
    from dataclasses import replace

    from rapidship.imagebuild.base import host_arch
    from rapidship.errors import ConfigError
    from rapidship.smoke import cluster as cl
    from rapidship.smoke.run import built_image, env_pairs, host_memlock, memlock_for, pick_uid

    if mode != "cpu" or gpus:
        raise ConfigError("--cluster", "the Docker cluster smoke is CPU (TCP) only: GPU workers run as processes on "
                          "the GPU machine", "leave out --mode/--gpus, see docs/cluster.md (GPU processes)")
    if not spill_mount or spill_owner not in (None, ""):
        raise ConfigError("--no-spill-mount" if not spill_mount else "--spill-owner",
                          "the cluster smoke always mounts a fresh 0700 spill dir per worker", "leave it out")
    v = load_matrix(variants_file).get(variant)
    a = arch_flag(arch or host_arch()).value
    plan = cl.plan_cluster(v, a, int_flag("--cluster", workers), pick_uid(uid, v.uid), memory, memory_limit, data,
                           shm_size, Path(out).resolve() / "spill", kill_worker,
                           image=image or built_image(Workspace(), v.id, a), env=env_pairs(env), metrics=metrics,
                           metrics_targets=Path(metrics_targets).resolve() if metrics_targets else None,
                           metrics_linger=None if metrics_linger in (None, "") else int_flag("--metrics-linger",
                                                                                              metrics_linger))
    memlock, notes = memlock_for("cpu", *host_memlock())
    plan = replace(plan, memlock=memlock, notes=notes,
                   **({"timeout_s": float(int_flag("--timeout", timeout))} if timeout not in (None, "") else {}))
    for note in notes:
        console.err.print(f"[yellow]note:[/] {note}")
    what = f"{plan.workers} worker(s) x --memory {memory}, --memory-limit {plan.memory_limit // 2**20} MiB, " \
           f"data {plan.data_bytes / 2**30:.2f} GiB{', killing one mid-shuffle' if plan.kill_worker else ''}"
    with console.status(f"cluster smoke {plan.ref}: {what}"):
        record = cl.cluster_smoke(plan)
    path = cl.write_record(record, Path(out))
    mib = lambda n: f"{n / 2**20:,.0f}"  # noqa: E731
    short = lambda name: name.removeprefix(f"{plan.name}-")  # noqa: E731
    for phase, rows in record.tiers.items():
        console.table(f"{phase}: per-worker tiers, MiB ({plan.name})",
                      ["worker", "memory keys/MiB", "disk keys/MiB", "spill files/MiB", "sent", "RSS peak", "OOM"],
                      [[short(r.worker), f"{r.memory_keys}/{mib(r.memory_bytes)}", f"{r.disk_keys}/{mib(r.disk_bytes)}",
                        f"{r.spill_files}/{mib(r.spill_file_bytes)}", mib(r.sent_bytes), mib(r.rss_peak_bytes),
                        r.oom_kills] for r in rows])
    console.table(f"containers on {record.network} (internal: {record.network_internal})",
                  ["container", "--memory MiB", "exit", "OOMKilled", "killed by smoke"],
                  [[short(c.name), mib(c.memory_bytes), "running" if c.exit_code is None else c.exit_code,
                    c.oom_killed, c.killed_by_smoke] for c in record.containers])
    scraped = [(c, c.metrics) for c in record.containers if c.metrics]
    if scraped:
        console.table("what each worker's /metrics said (highest over the run), MiB",
                      ["worker", "scrapes", "cgroup peak", "spill dir", "spill files", "dask spilled", "oom_kill"],
                      [[short(c.name), f"{m.scrapes} ({m.failures} failed)", *scraped_cells(m)] for c, m in scraped])
    console.err.print(f"result {'exact' if record.result_exact else 'NOT exact'} ({record.got} of {record.expected}); "
                      f"job {seconds_text(record.job_seconds)}; {record.verdict} in {record.seconds}s -> {path}")
    for line in record.notes[len(plan.notes):]:
        console.err.print(f"[yellow]note:[/] {line}")
    cl.raise_on_failure(record, path)


def scraped_cells(m) -> list[str]:
    """The scraped maxima a person reads first (the report shows the same)."""
    from rapidship.smoke.scrape import OOM_KILLS

    def mib(key: str) -> str:
        return f"{m.highest[key] / 2**20:,.0f}" if key in m.highest else "-"
    files = m.highest.get("rapidship_spill_dir_files")
    return [mib("rapidship_cgroup_memory_peak_bytes"), mib("rapidship_spill_dir_used_bytes"),
            "-" if files is None else f"{files:.0f}", mib('dask_worker_memory_bytes{type="spilled"}'),
            f"{m.highest[OOM_KILLS]:.0f}" if OOM_KILLS in m.highest else "-"]
