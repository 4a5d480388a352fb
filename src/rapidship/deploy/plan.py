"""What `invoke deploy` starts, sized by the doctor's own rules (runtime/rules.py), pure.

The image is the pushed index by digest (push.json), never a tag. Each worker container's memory
cap is its dask memory_limit plus the doctor's headroom; its spill volume holds at least one full
host tier (what the SpillDirSmallerThanHostLimit alert watches); a GPU worker gets one GPU, its
device limit the doctor's share of the GPU's memory and /dev/shm for UCX; every container runs the
image's entrypoint (its preflight) with the dask command as arguments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rapidship.config.matrix import Variant
from rapidship.deploy.gpu_share import GpuShare, parse_scheduler, parse_share
from rapidship.errors import ConfigError
from rapidship.records import PushRecord
from rapidship.runtime.rules import HEADROOM_MIN, MIN_WORKER_MEMORY, cap_for_limit, worker_limit_for
from rapidship.smoke.run import parse_size

MiB, GiB = 2**20, 2**30
SCHEDULER_PORT, SCHEDULER_HTTP, WORKER_HTTP = 8786, 8787, 8788
SPILL = "/spill"
# the scheduler's HTTP routes: distributed's defaults and its API, whose /api/v1/retire_workers the
# Dask operator calls to scale a worker group down gracefully (it then deletes the Deployments named
# as the retired workers: workers are named after them, --name below)
SCHEDULER_ROUTES = ('["distributed.http.scheduler.prometheus","distributed.http.scheduler.info",'
                    '"distributed.http.scheduler.json","distributed.http.health","distributed.http.proxy",'
                    '"distributed.http.statics","distributed.http.scheduler.api"]')
ROUTES_ENV = "DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES"
UCX_SHM = GiB            # /dev/shm for UCX's shared-memory transport between a node's workers
CPU_SHM = 256 * MiB
MAX_WORKERS = 64
# Kubernetes with --tls-secret: the site's Secret (keys ca.crt, tls.crt, tls.key, as cert-manager
# writes them) mounted here in every pod; dask then speaks only tls:// and checks each peer's
# certificate against the site CA (distributed checks no host names: pods have no fixed ones)
TLS_DIR = "/etc/rapidship/tls"
TLS_KEYS = ("ca.crt", "tls.crt", "tls.key")
_SECRET_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
# Kubernetes: who may reach the HTTP ports (Prometheus) and whom the pods may ask for names (DNS),
# each a namespace AND pod labels (NAMESPACE/LABEL=VALUE[,LABEL=VALUE]); the defaults are
# kube-prometheus's and kube-dns/CoreDNS's
PROMETHEUS_PEER = "monitoring/app.kubernetes.io/name=prometheus"
OPERATOR_NAMESPACE = "dask-operator"   # where the Dask operator runs (its retire_workers calls): the Helm chart's
DNS_PEER = "kube-system/k8s-app=kube-dns"
WORKER_CPU = SCHEDULER_CPU = "1"   # CPU requests: one dask thread each, and its event loop
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")
_CPU = re.compile(r"^(?:[0-9]+(?:\.[0-9]{1,3})?|[0-9]+m)$")


@dataclass(frozen=True)
class Peer:
    """Pods of one namespace with these labels (a NetworkPolicy peer naming both)."""
    namespace: str
    labels: tuple[tuple[str, str], ...]


def parse_peer(text: str, flag: str) -> Peer:
    """NAMESPACE/LABEL=VALUE[,LABEL=VALUE...] -> Peer; anything else one error naming the flag."""
    fix = f"pass {flag} NAMESPACE/LABEL=VALUE[,LABEL=VALUE], e.g. {PROMETHEUS_PEER}"
    namespace, slash, rest = str(text).partition("/")
    if not _NAMESPACE.match(namespace):
        raise ConfigError(flag, f"{text!r} does not start with a namespace name (lower-case letters, digits and '-', "
                          "at most 63) and '/'", fix)
    labels = []
    for pair in rest.split(",") if slash and rest else []:
        key, eq, value = pair.partition("=")
        if not eq or not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value):
            raise ConfigError(flag, f"{pair!r} in {text!r} is not LABEL=VALUE with a Kubernetes label name and value", fix)
        labels.append((key, value))
    if not labels:
        raise ConfigError(flag, f"{text!r} names no pod labels: every pod of namespace {namespace} would be admitted", fix)
    return Peer(namespace, tuple(labels))


def cpu_quantity(text: str, flag: str = "--cpu") -> str:
    """A Kubernetes CPU quantity above zero ('2', '1.5', '500m'), as written."""
    value = str(text).strip()
    if not _CPU.match(value) or float(value.rstrip("m") or 0) == 0:
        raise ConfigError(flag, f"{text!r} is not a CPU quantity above zero", f"pass {flag} 2 (cores) or {flag} 500m")
    return value


@dataclass(frozen=True)
class DeployPlan:
    variant: str
    arch: str
    image: str                 # registry/repository@sha256:... (the pushed index)
    gpu: bool
    workers: int
    memory_bytes: int          # each worker container's cap (= its swap cap)
    memory_limit: int          # dask's --memory-limit in it
    spill_bytes: int           # each worker's spill volume
    shm_bytes: int
    uid: int
    name: str = "rapidship"
    gpus_per_worker: int = 0
    scheduler_memory_bytes: int = 2 * GiB
    prometheus_image: str | None = None   # Compose: a Prometheus (pinned) scraping the cluster, profile monitoring
    spill_storage_class: str | None = None  # Kubernetes: the spill volume a per-pod PVC of this class, not an emptyDir
    tls_secret: str | None = None   # Kubernetes: the Secret with the site CA and the cluster's certificate
    cpu: str = WORKER_CPU           # Kubernetes: each worker's CPU request
    guaranteed: bool = False        # Kubernetes: limits = requests for CPU and memory (QoS class Guaranteed)
    prometheus_peer: Peer = parse_peer(PROMETHEUS_PEER, "--prometheus-peer")   # Kubernetes: may reach 8787, 8788
    dns_peer: Peer = parse_peer(DNS_PEER, "--dns-peer")                        # Kubernetes: the pods' DNS
    gpu_share: GpuShare | None = None   # Kubernetes: each worker on a MIG instance, a memory quota or a replica
    scheduler: str = "default"          # Kubernetes: "volcano" adds a Volcano Job (gang-scheduled)
    queue: str = "default"              # the Volcano queue
    operator_namespace: str = OPERATOR_NAMESPACE   # DaskCluster: the operator's namespace, may reach 8786, 8787

    @property
    def scheme(self) -> str:
        return "tls" if self.tls_secret else "tcp"

    def tls_env(self) -> dict[str, str]:
        """dask's TLS settings (distributed.comm.*) for every role: encryption required (a plain tcp://
        peer is refused), the site CA, the one certificate the scheduler, workers and their client side
        present. Empty without --tls-secret."""
        if not self.tls_secret:
            return {}
        ca, cert, key = (f"{TLS_DIR}/{k}" for k in TLS_KEYS)
        env = {"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True", "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": ca}
        for role in ("SCHEDULER", "WORKER", "CLIENT"):
            env[f"DASK_DISTRIBUTED__COMM__TLS__{role}__CERT"] = cert
            env[f"DASK_DISTRIBUTED__COMM__TLS__{role}__KEY"] = key
        return env

    def worker_command(self, name: str) -> list[str]:
        """The dask command, as arguments to the image's entrypoint (never replacing it). `name`: the
        worker's dask name, the same after every restart (its container, its pod's Deployment), so its
        metrics keep one `worker` label and the operator finds the Deployment of a retired worker."""
        kind = ["dask", "cuda", "worker"] if self.gpu else ["dask", "worker"]
        return [*kind, f"{self.scheme}://{self.name}-scheduler:{SCHEDULER_PORT}", "--name", name, "--nworkers", "1",
                "--nthreads", "1", "--memory-limit", str(self.memory_limit), "--local-directory", SPILL,
                "--dashboard-address", f":{WORKER_HTTP}", "--preload", "rapids_runtime.metrics", *self.share_args]

    @property
    def share_args(self) -> list[str]:
        """dask-cuda's device limit and RMM pool sized to the GPU share, not the card (its own default
        would take 80 % of what the card reports, past a slice's or quota's end)."""
        if not self.gpu_share:
            return []
        device, pool = self.gpu_share.sizes()
        return ["--device-memory-limit", str(device), "--rmm-pool-size", str(pool)]

    @property
    def scheduler_command(self) -> list[str]:
        return ["dask", "scheduler", "--protocol", self.scheme, "--port", str(SCHEDULER_PORT),
                "--dashboard-address", f":{SCHEDULER_HTTP}"]


_DIGEST = re.compile(r"^(?:[^@\s]+@)?sha256:[0-9a-f]{64}$")


_REGISTRY_DIGEST = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")


def pinned(image: str, flag: str = "--image") -> str:
    """An image by digest (repo@sha256:...) or by local image id (sha256:...), never a tag."""
    if not _DIGEST.match(str(image)):
        raise ConfigError(flag, f"{image!r} is not pinned to a digest: a tag can move under a running cluster",
                          "pass repo@sha256:<64 hex> or an image id sha256:<64 hex>, or leave --image out for the push record's")
    return str(image)


def registry_pinned(image: str, flag: str = "--image") -> str:
    """For Kubernetes: repo@sha256:... only. A kubelet reads a bare `sha256:<hex>` as a repository
    named sha256 on Docker Hub with that tag: mutable, and not this image."""
    if not _REGISTRY_DIGEST.match(str(image)):
        raise ConfigError(flag, f"{image!r} is no registry repository by digest: Kubernetes pulls a bare "
                          "sha256:<hex> as a tag of docker.io/library/sha256",
                          "pass REGISTRY/REPO@sha256:<64 hex> (invoke push records it), or leave --image out")
    return str(image)


def image_ref(record: PushRecord | str, arch: str) -> str:
    """The pushed index by digest; the arch must be in it. A string is an already pinned --image."""
    if isinstance(record, str):
        return pinned(record)
    if arch not in record.arches:
        raise ConfigError("--arch", f"{arch} was not pushed for {record.variant} (pushed: {', '.join(sorted(record.arches))})",
                          f"push it: invoke push --variant {record.variant} --arch {arch}")
    return f"{record.registry}/{record.repository}@{record.index_digest}"


def plan_deploy(variant: Variant, record: PushRecord | str, arch: str, workers, memory: str, memory_limit: str | None,
                gpus, spill_size: str | None, uid: int, name: str = "rapidship", prometheus_image: str | None = None,
                spill_storage_class: str | None = None, tls_secret: str | None = None, cpu: str | None = None,
                guaranteed: bool = False, prometheus_peer: str | None = None, dns_peer: str | None = None,
                operator_namespace: str | None = None, gpu_share: str | None = None, scheduler: str | None = None,
                queue: str | None = None) -> DeployPlan:
    """Flags -> plan; every refusal names its flag and what would work."""
    try:
        n = int(workers)
    except (TypeError, ValueError):
        raise ConfigError("--workers", f"{workers!r} is not a whole number", "pass --workers 2") from None
    if not 1 <= n <= MAX_WORKERS:
        raise ConfigError("--workers", f"{n}: deploy writes 1 to {MAX_WORKERS} workers", "pass --workers 2")
    gpu = variant.cuda is not None
    per = 0
    if gpus not in (None, ""):
        try:
            per = int(gpus)
        except (TypeError, ValueError):
            raise ConfigError("--gpus", f"{gpus!r} is not a whole number of GPUs per worker", "pass --gpus 1") from None
        if not gpu and per:
            raise ConfigError("--gpus", f"{variant.id} is a CPU variant: it has no CUDA to use a GPU with",
                              "leave --gpus out, or deploy a CUDA variant")
        if gpu and per != 1:
            raise ConfigError("--gpus", f"{per} GPUs per worker: a dask-cuda worker drives exactly one GPU "
                              "(one worker per GPU is how dask-cuda spreads over a node)",
                              "pass --gpus 1 and --workers as many as the node has GPUs")
    elif gpu:
        per = 1
    cap = parse_size(memory, "--memory")
    least = MIN_WORKER_MEMORY + HEADROOM_MIN
    if cap < least:
        raise ConfigError("--memory", f"{cap // MiB} MiB per worker: the doctor refuses a container below {least // MiB} MiB",
                          f"pass --memory {least // MiB}m or more")
    limit = worker_limit_for(cap)
    if memory_limit not in (None, ""):
        asked = parse_size(memory_limit, "--memory-limit")
        if asked > limit:
            raise ConfigError("--memory-limit", f"{asked // MiB} MiB does not fit a {cap // MiB} MiB container with the "
                              f"doctor's headroom (at most {limit // MiB} MiB): the kernel would kill the worker first",
                              f"pass --memory {-(-cap_for_limit(asked) // MiB)}m, or --memory-limit {limit // MiB}m or less")
        limit = asked
    spill = parse_size(spill_size, "--spill-size") if spill_size not in (None, "") else 2 * limit
    if spill < limit:
        raise ConfigError("--spill-size", f"{spill // MiB} MiB is smaller than one full host tier ({limit // MiB} MiB): "
                          "the first full spill ends in ENOSPC", f"pass --spill-size {-(-2 * limit // MiB)}m")
    if tls_secret not in (None, "") and not _SECRET_NAME.match(str(tls_secret)):
        raise ConfigError("--tls-secret", f"{tls_secret!r} is not a Kubernetes Secret name (lower-case letters, digits, "
                          "'-' and '.', at most 253)", "pass the name of the Secret holding ca.crt, tls.crt and tls.key")
    share = parse_share(gpu_share) if gpu_share not in (None, "") else None
    if share and not gpu:
        raise ConfigError("--gpu-share", f"{variant.id} is a CPU variant: it has no CUDA to use a GPU share with",
                          "leave --gpu-share out, or deploy a CUDA variant")
    if queue not in (None, "") and not _NAMESPACE.match(str(queue)):
        raise ConfigError("--queue", f"{queue!r} is not a Volcano queue name (lower-case letters, digits and '-')",
                          "pass --queue default, or the queue the site made for this team")
    if queue not in (None, "") and (scheduler or "default") != "volcano":
        raise ConfigError("--queue", "names a Volcano queue, and the default scheduler has none",
                          "pass --scheduler volcano too, or leave --queue out")
    operator_namespace = operator_namespace or OPERATOR_NAMESPACE
    if not _NAMESPACE.match(str(operator_namespace)):
        raise ConfigError("--operator-namespace", f"{operator_namespace!r} is not a namespace name (lower-case letters, "
                          "digits and '-', at most 63)", "pass the namespace the Dask operator runs in, e.g. "
                          f"--operator-namespace {OPERATOR_NAMESPACE}")
    return DeployPlan(variant=variant.id, arch=arch, image=image_ref(record, arch), gpu=gpu, workers=n,
                      memory_bytes=cap, memory_limit=limit, spill_bytes=spill,
                      shm_bytes=UCX_SHM if gpu else CPU_SHM, uid=uid, name=name, gpus_per_worker=per,
                      prometheus_image=pinned(prometheus_image, "--prometheus-image") if prometheus_image else None,
                      spill_storage_class=spill_storage_class or None, tls_secret=tls_secret or None,
                      cpu=cpu_quantity(cpu) if cpu not in (None, "") else WORKER_CPU, guaranteed=bool(guaranteed),
                      prometheus_peer=parse_peer(prometheus_peer or PROMETHEUS_PEER, "--prometheus-peer"),
                      dns_peer=parse_peer(dns_peer or DNS_PEER, "--dns-peer"), operator_namespace=operator_namespace,
                      gpu_share=share, scheduler=parse_scheduler(scheduler), queue=str(queue or "default"))
