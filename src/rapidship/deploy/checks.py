"""The rules a deployment must keep, over Compose files and Kubernetes manifests as written (ours
or a site's edit of them), pure. Each problem names the container, the rule and what to change:

  entrypoint  `command:` (Kubernetes) or `entrypoint:` (Compose) that does not go through the
              image's entrypoint skips the preflight (the doctor's checks of memory, spill, GPU)
  memory      a container limit below the worker's --memory-limit plus the doctor's headroom:
              the kernel kills the worker before dask spills
  spill       a spill volume smaller than one full host tier (--memory-limit), or in memory
  shm         a UCX worker (dask cuda worker, ucx://) without a /dev/shm of its own; on a node
              sharing its GPUs through MPS (nodeSelector nvidia.com/gpu.sharing-strategy: mps), a
              /dev/shm volume at all: it hides the MPS daemon's, which the device plugin mounts there
"""

from __future__ import annotations

import re

from rapidship.deploy.gpu_share import MPS, STRATEGY_LABEL
from rapidship.deploy.plan import SPILL, UCX_SHM
from rapidship.errors import ConfigError
from rapidship.runtime.rules import cap_for_limit
from rapidship.smoke.run import parse_size

ENTRYPOINT = "/usr/local/bin/rapids-entrypoint"
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
          "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}


def quantity(value) -> int | None:
    """Bytes of a Kubernetes quantity, a Compose size or a dask size ('4Gi', '4g', '4GiB', 4e9)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    m = re.fullmatch(r"\s*([0-9.]+(?:e[0-9]+)?)\s*([kmgt]i?)?b?\s*", str(value or ""), re.I)
    if not m:
        return None
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])


def docker_size(value) -> int | None:
    """Bytes of a Compose/Docker size: its k, m, g are binary ('4g' is 4 GiB), unlike Kubernetes'
    and dask's decimal G (quantity). None when it does not parse."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    try:
        return parse_size(str(value), "size")
    except ConfigError:
        return None


def _flag(args: list[str], name: str) -> str | None:
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def is_worker(args: list[str]) -> bool:
    return "worker" in args[:3] or any(a.endswith("dask-worker") or a.endswith("dask-cuda-worker") for a in args[:1])


def uses_ucx(args: list[str]) -> bool:
    return args[:3] == ["dask", "cuda", "worker"] or any("ucx" in a for a in args)


def _entrypoint(where: str, override, field: str) -> list[str]:
    if override and [str(x) for x in (override if isinstance(override, list) else str(override).split())][0] != ENTRYPOINT:
        return [f"{where}: entrypoint: `{field}` replaces the image's entrypoint, so the preflight never runs; "
                f"put the dask command in `{'args' if field == 'command' else 'command'}` instead, or start "
                f"the {field} with {ENTRYPOINT}"]
    return []


def _memory(where: str, args: list[str], cap: int | None) -> list[str]:
    limit = quantity(_flag(args, "--memory-limit"))
    if not is_worker(args) or limit is None:
        return []
    need = cap_for_limit(limit)
    if cap is None:
        return [f"{where}: memory: no memory limit on a worker with --memory-limit {limit}: set it to at least "
                f"{need} ({need / 2**30:.2f} GiB: the limit plus the doctor's headroom)"]
    if cap < need:
        return [f"{where}: memory: limit {cap} B is below --memory-limit {limit} B plus the doctor's headroom "
                f"({need} B): the kernel kills the worker before dask spills; raise the limit to {need} or lower "
                f"--memory-limit"]
    return []


def _spill(where: str, args: list[str], size: int | None, in_memory: bool) -> list[str]:
    limit = quantity(_flag(args, "--memory-limit"))
    if not is_worker(args):
        return []
    if in_memory:
        return [f"{where}: spill: the spill volume is in memory (tmpfs / emptyDir medium Memory): what spills "
                "counts against the same memory limit; use a disk-backed volume"]
    if limit is not None and size is not None and size < limit:
        return [f"{where}: spill: the spill volume ({size} B) is smaller than one full host tier "
                f"(--memory-limit {limit} B): the first full spill ends in ENOSPC; give it at least {2 * limit}"]
    return []


def _shm(where: str, args: list[str], has_shm: bool, mps: bool = False) -> list[str]:
    if mps:
        return [f"{where}: shm: a /dev/shm volume on a node sharing its GPUs through MPS hides the MPS daemon's "
                "/dev/shm that the NVIDIA device plugin mounts there, so CUDA cannot reach the MPS server; drop the "
                "volume (invoke deploy --gpu-share mps:... writes none)"] if has_shm else []
    if is_worker(args) and uses_ucx(args) and not has_shm:
        return [f"{where}: shm: a UCX worker without its own /dev/shm (the runtime's 64 MB default): UCX's "
                f"shared-memory transport fails; give it at least {UCX_SHM} (Compose shm_size, Kubernetes an "
                "emptyDir of medium Memory at /dev/shm)"]
    return []


def compose_problems(doc: dict) -> list[str]:
    problems = []
    volumes = doc.get("volumes") or {}
    for name, svc in sorted((doc.get("services") or {}).items()):
        args = [str(a) for a in (svc.get("command") or [])] if isinstance(svc.get("command"), list) \
            else str(svc.get("command") or "").split()
        where = f"service {name}"
        problems += _entrypoint(where, svc.get("entrypoint"), "entrypoint")
        problems += _memory(where, args, docker_size(svc.get("mem_limit")))
        local = _flag(args, "--local-directory") or SPILL
        in_memory = any(str(t).split(":")[0] == local for t in svc.get("tmpfs") or [])
        for v in svc.get("volumes") or []:
            source, _, target = str(v).partition(":")
            if target.split(":")[0] == local and ((volumes.get(source) or {}).get("driver_opts") or {}).get("type") == "tmpfs":
                in_memory = True
        problems += _spill(where, args, None, in_memory)
        shm = docker_size(svc.get("shm_size"))
        problems += _shm(where, args, shm is not None and shm >= UCX_SHM)
    return problems


def _image(where: str, image: str) -> list[str]:
    """A pod's image must be a registry repository by digest: a bare sha256:<hex> is a mutable tag of
    docker.io/library/sha256 to a kubelet, a tag moves under a running cluster."""
    from rapidship.deploy.plan import registry_pinned
    from rapidship.errors import ConfigError

    try:
        registry_pinned(image)
    except ConfigError:
        return [f"{where}: image: {image or '(none)'} is no registry repository by digest: a kubelet pulls tags "
                "(and reads sha256:<hex> as a tag of docker.io/library/sha256); write REGISTRY/REPO@sha256:<64 hex>"]
    return []


def pod_problems(where: str, pod: dict) -> list[str]:
    problems = []
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    mps = (pod.get("nodeSelector") or {}).get(STRATEGY_LABEL) == MPS
    for c in pod.get("containers") or []:
        at = f"{where} container {c.get('name')}"
        args = [str(a) for a in (c.get("args") or [])]
        command = [str(a) for a in (c.get("command") or [])]
        if command and command[0] == ENTRYPOINT:
            args = command[1:] + args
        problems += _entrypoint(at, command, "command")
        problems += _image(at, str(c.get("image") or ""))
        if command and command[0] != ENTRYPOINT:
            args = command + args
        limits = ((c.get("resources") or {}).get("limits") or {})
        problems += _memory(at, args, quantity(limits["memory"]) if "memory" in limits else None)
        local = _flag(args, "--local-directory") or SPILL
        mounts = {m.get("mountPath"): volumes.get(m.get("name")) or {} for m in c.get("volumeMounts") or []}
        volume = mounts.get(local) or {}
        spill = volume.get("emptyDir")
        size = quantity(spill.get("sizeLimit")) if spill and spill.get("sizeLimit") is not None else None
        claim = (((volume.get("ephemeral") or {}).get("volumeClaimTemplate") or {}).get("spec") or {})
        if claim:   # a per-pod PVC: its requested storage is the room
            size = quantity(((claim.get("resources") or {}).get("requests") or {}).get("storage"))
        problems += _spill(at, args, size, bool(spill) and spill.get("medium") == "Memory")
        shm = (mounts.get("/dev/shm") or {}).get("emptyDir") or {}
        problems += _shm(at, args, "/dev/shm" in mounts if mps else shm.get("medium") == "Memory", mps)
    return problems


def manifest_problems(docs: list[dict]) -> list[str]:
    from rapidship.deploy.k8s import pod_specs

    return [p for doc in docs for where, pod in pod_specs(doc) for p in pod_problems(where, pod)]
