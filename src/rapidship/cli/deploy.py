"""invoke deploy / deploy-check: Compose and Kubernetes for a pushed variant (docs/deploy.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rapidship.cli.options import task

from rapidship import console
from rapidship.cli.options import VARIANTS_HELP, arch_flag
from rapidship.config.matrix import load_matrix
from rapidship.errors import ConfigError, GateFailure, exits_cleanly
from rapidship.records import PushRecord, Workspace

TARGETS = ("compose", "k8s")


@task(help={"variant": "variant id (pushed: its build/<variant>/push.json names the index by digest)",
            "target": "compose (a docker compose stack) or k8s (a DaskCluster for the Dask operator, and plain "
                      "Deployments + Service)",
            "workers": "worker containers / pods (default 2; GPU variants: one per GPU)",
            "memory": "each worker's memory cap (default 4g); dask's --memory-limit is the cap less the doctor's headroom",
            "memory-limit": "each worker's dask --memory-limit (default: the doctor's, from --memory)",
            "gpus": "GPUs per worker for a CUDA variant (dask-cuda drives one: 1, the default)",
            "spill-size": "each worker's spill volume (default 2 x --memory-limit; at least one full host tier)",
            "arch": "amd64 or arm64 (default: the push record's first)", "uid": "run uid (default: the variant's)",
            "name": "cluster name: prefix of every service, pod and volume (default rapidship)",
            "pull-secret": "k8s: the imagePullSecret to name (created by the site; never embedded)",
            "prometheus-image": "compose: add a Prometheus (by digest) in profile monitoring, scraping the cluster "
                                "with the shipped alert rules, its UI on 127.0.0.1:9090",
            "spill-storage-class": "k8s: each worker's spill volume a per-pod PVC of this StorageClass (ephemeral "
                                   "volume) instead of an emptyDir",
            "tls-secret": "k8s: dask's comms over TLS with the certificates of this Secret (ca.crt, tls.crt, "
                          "tls.key; the site CA's), plain tcp:// refused",
            "cpu": "k8s: each worker's CPU request (default 1; '2', '1.5', '500m')",
            "guaranteed": "k8s: CPU and memory limits equal to the requests in every pod (QoS class Guaranteed)",
            "prometheus-peer": "k8s: the Prometheus that may reach the HTTP ports 8787/8788, NAMESPACE/LABEL=VALUE[,...] "
                               "(default monitoring/app.kubernetes.io/name=prometheus)",
            "operator-namespace": "k8s: the namespace the Dask operator runs in, admitted to the DaskCluster's "
                                  "scheduler (matched by its kubernetes.io/metadata.name label; default dask-operator)",
            "dns-peer": "k8s: the DNS pods the cluster may ask, NAMESPACE/LABEL=VALUE[,...] "
                        "(default kube-system/k8s-app=kube-dns)",
            "gpu-share": "k8s: each worker on part of a GPU: mig:<profile> (a MIG instance, e.g. mig:1g.10gb), "
                         "memory:<GiB> (a memory quota on a shared card, e.g. memory:30), or mps:<replicas>x<card>gb / "
                         "time-slicing:<replicas>x<card>gb (one of the device plugin's replicas of a card, e.g. "
                         "mps:4x80gb; :shared for nvidia.com/gpu.shared); device limit and RMM pool sized to it",
            "scheduler": "k8s: default, or volcano (adds a Volcano Job: scheduler and workers gang-scheduled; "
                         "a memory share asks for Volcano's vGPU)",
            "queue": "k8s: the Volcano queue (default: default)",
            "image": "an image by digest or id instead of the push record's (repo@sha256:..., sha256:...; never a tag)",
            "out": "where the files go (default build/<variant>/deploy-<target>)",
            "json": "print the plan and the files written as JSON on stdout", **VARIANTS_HELP})
@exits_cleanly
def deploy(c, variant, target="compose", workers="2", memory="4g", memory_limit=None, gpus=None, spill_size=None,
           arch=None, uid=None, name="rapidship", pull_secret=None, image=None, out=None,
           variants_file="variants.yaml", prometheus_image=None, spill_storage_class=None,
           tls_secret=None, cpu=None, guaranteed=False, prometheus_peer=None, dns_peer=None, operator_namespace=None,
           gpu_share=None, scheduler=None, queue=None, json=False):
    """Write a Compose stack or Kubernetes manifests for a pushed variant, sized by the doctor's rules."""
    from rapidship.deploy import write

    if target not in TARGETS:
        raise ConfigError("--target", f"{target!r} is not a deploy target", "pass --target compose or --target k8s")
    v = load_matrix(variants_file).get(variant)
    ws = Workspace()
    from rapidship.cli.options import int_flag
    from rapidship.deploy.plan import plan_deploy

    if image:   # pinned (digest or id) by the plan, which refuses a tag
        ref, a = image, arch_flag(arch or v.arches[0].value).value
    else:
        record = ws.load(ws.push(v.id), PushRecord, f"invoke push --variant {v.id}", "push record")
        a = arch_flag(arch).value if arch else sorted(record.arches)[0]
        ref = record
    for flag, value, wants in (("--prometheus-image", prometheus_image, "compose"),
                               ("--spill-storage-class", spill_storage_class, "k8s"), ("--tls-secret", tls_secret, "k8s"),
                               ("--cpu", cpu, "k8s"), ("--guaranteed", guaranteed, "k8s"),
                               ("--prometheus-peer", prometheus_peer, "k8s"), ("--dns-peer", dns_peer, "k8s"),
                               ("--operator-namespace", operator_namespace, "k8s"),
                               ("--gpu-share", gpu_share, "k8s"), ("--scheduler", scheduler, "k8s"),
                               ("--queue", queue, "k8s")):
        if value and target != wants:
            raise ConfigError(flag, f"applies to --target {wants} only", f"pass --target {wants}, or leave it out")
    plan = plan_deploy(v, ref, a, workers, memory, memory_limit, gpus, spill_size,
                       int_flag("--uid", uid) if uid not in (None, "") else v.uid, name=name,
                       prometheus_image=prometheus_image, spill_storage_class=spill_storage_class,
                       tls_secret=tls_secret, cpu=cpu, guaranteed=guaranteed, prometheus_peer=prometheus_peer,
                       dns_peer=dns_peer, operator_namespace=operator_namespace, gpu_share=gpu_share,
                       scheduler=scheduler, queue=queue)
    files = write.write(plan, target, Path(out or ws.variant_dir(v.id) / f"deploy-{target}"), pull_secret)
    for path in files:
        console.err.print(f"wrote {path}")
    console.err.print(f"{plan.workers} worker(s) x {plan.memory_bytes // 2**20} MiB (dask --memory-limit "
                      f"{plan.memory_limit // 2**20} MiB), spill {plan.spill_bytes // 2**20} MiB each, image {plan.image}")
    if target == "k8s":
        qos = "Guaranteed" if plan.guaranteed else "Burstable"
        prom = plan.prometheus_peer
        console.err.print(f"workers request {plan.cpu} CPU (QoS {qos}); HTTP ports admitted to pods "
                          f"{','.join(f'{k}={v}' for k, v in prom.labels)} in namespace {prom.namespace}; "
                          f"DaskCluster: operator namespace {plan.operator_namespace}")
        if plan.gpu_share:
            device, pool = plan.gpu_share.sizes()
            console.err.print(f"each worker on {plan.gpu_share.label} ({', '.join(plan.gpu_share.resources(plan.scheduler))}):"
                              f" --device-memory-limit {device // 2**20} MiB, --rmm-pool-size {pool // 2**20} MiB")
    if json:
        console.print_json({"plan": dataclasses.asdict(plan), "files": [str(p) for p in files]})


@task(name="deploy-check", iterable=["file"],
      help={"file": "a Compose file or Kubernetes manifests (YAML, several documents allowed); repeatable"})
@exits_cleanly
def deploy_check(c, file=None):
    """Check Compose files or Kubernetes manifests against the deploy rules (entrypoint, memory, spill, shm)."""
    from rapidship.deploy.write import check_file

    if not file:
        raise ConfigError("--file", "names no file to check", "pass --file compose.yaml (repeatable)")
    problems = [p for f in file for p in check_file(Path(f))]
    if problems:
        raise GateFailure("deploy-check", "\n  ".join(problems), "docs/deploy.md says what each rule keeps")
    console.err.print(f"ok: {', '.join(file)} keep every deploy rule")
