"""The env's image layers, planned per distribution from the lock at render time.

A patch of one package should ship that package's bytes: a distribution whose wheel is large gets a
layer of its own; small ones share a layer with others of their kind (the kinds change at different
rates: the CUDA release, the RAPIDS release train, compiled libraries, pure Python), packed in name
order up to GROUP_DISC_BYTES on a disc (estimated from their wheels: DISC_PER_WHEEL_BYTE), so a patch
of one re-ships at most a layer that small. If that makes more layers than the variant's
`layer_budget` (variants.yaml), the limit doubles until it fits, and small packages' patches may then
miss the delta goal (the default budget keeps the committed locks within it: a test).

The order is the import's cost: an engine keys a layer by its chain (it and every layer below), so
a patch makes the site's loader write again every layer above the lowest one it changes. A year of
patches costs the site, summed over layers, each layer's patches times the bytes above it; the order
that makes that least puts layers by patches per byte, the fewest at the bottom (swap two neighbours
i below j: the cost changes by rate_i x size_j - rate_j x size_i). So every layer, of any kind, lies
by its releases a year per byte, in half-octave steps (ORDER_STEPS), then by name. The bytes are
those the layer holds installed, which the site's engine writes again (a wheel is deflated: numpy's
17 MB wheel is 57 MB installed, xyzservices' 18x its wheel). N and N+1 must plan alike for a delta
to stay small, so both figures are the series' (lock/sizes.py): the releases in the year before its
major series began and its wheels' installed bytes when the series was first recorded, kept by every
record made again for a version of the series (KIND_RATES and this package's size where there are
none: a conda channel, whose lock records each `.conda` file's size and no installed size, so a
conda env's order weighs its compressed files); this version's own size moved layers when a patch
changed it a little (a test shows it). `yearly_refeed` gives a plan's cost and `best_order` the exact optimum;
a test holds the plan within 1.05x of it. Small distributions share a layer with others of their
kind (the kinds change at different rates: the CUDA release, the RAPIDS release train, compiled
libraries, pure Python), in name order.

Both flavours share this plan (and every stage after it): a pip lock's distributions weigh their
wheels (lock/sizes.py), a conda lock's packages their `.conda` files (the lock records each one's
size); the two differ only in the rest layer (pip: the venv itself; conda: the env's own history) and
in how a package's kind shows in its name or channel (`kind_of`).

Pure core: `plan_layers(distributions, budget)`. The plan is data (`to_json`): render writes it into
the build context (builder/layer-plan.json), splits each arch's lock by it (`lock_parts`: one
requirements file per layer) and names one builder stage and one COPY per layer in the Dockerfile;
each stage installs only its layer's wheels (builder/install_layer.py), so a one-package patch
rebuilds one layer; builder/layer_record.py merges what each layer holds into the plan, which the
image keeps (/opt/rapidship/layers.json) and `invoke size-report` shows.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

FORMAT = 1
# A grouped distribution's patch re-ships its whole group: the goal (docs/export.md) allows 2 MB
# beyond 1.25 x its own bytes. A group is weighed by what it is on a disc (zstd -3 of the installed
# layer), estimated from its wheels (.conda files): pure Python 2.1-2.7x them, as the env compiles its
# bytecode; compiled code 1.1-1.5x (measured on both flavours' images: docs/measurements/
# layers-rapids-2026-12-06, conda-wheels-2026-12-07). The group limit leaves the env's records and a
# margin within the 2 MB.
DISC_PER_WHEEL_BYTE = {True: 2.5, False: 1.5}  # pure, compiled
GROUP_DISC_BYTES = 1_750_000
REST = "venv"  # the venv itself (bin/python, pyvenv.cfg) and whatever no RECORD names: always the last layer
CONDA_REST = "env"  # conda: the env's own files no package names (conda-meta/history): always the last layer
RESTS = {REST: "the venv itself (bin/, pyvenv.cfg) and files no RECORD names",
         CONDA_REST: "the env's own files no package names (conda-meta/history)"}
KINDS = {  # why they are grouped apart
    "cuda": "changes with the CUDA release (NVIDIA's wheels)",
    "compiled": "compiled code, changes with its own releases",
    "rapids": "changes with the RAPIDS release train and its hotfixes",
    "python": "pure Python, the most frequent patches",
}
_CUDA_BUILD = re.compile(r"-cu\d+$")
_RAPIDS_PURE = {"dask-cuda", "rapids-dask-dependency", "rapids-logger", "distributed-ucxx", "dask-cudf"}
# conda: NVIDIA's CUDA packages carry no -cuNN suffix (the cuda-version package pins their line), and a
# channel says what a name cannot: rapidsai's packages move with the release train, nvidia's with CUDA
_CONDA_CUDA = re.compile(r"^(cuda-|libcublas|libcufft|libcufile|libcurand|libcusolver|libcusparse|libnpp|libnvjitlink"
                         r"|libnvjpeg|libnvfatbin|libnvvm|libnvptxcompiler|nccl$|libnccl)")
CHANNEL_KINDS = {"rapidsai": "rapids", "rapidsai-nightly": "rapids", "nvidia": "cuda"}
# releases a year where the index shows none (a conda channel records no upload times): the CUDA
# release's updates, a compiled library's, the RAPIDS train's six and its hotfixes, pure Python's
KIND_RATES = {"cuda": 4, "compiled": 4, "rapids": 8, "python": 12}
ORDER_STEPS = 2  # the order key's steps per doubling of releases per byte
LEAST_BUDGET = len(KINDS) + 1  # one group per kind and the venv: any lock fits
IMAGE_LAYERS = 100  # an image's most: overlay2 refuses ~125, and a site's image derived from ours needs room
RUNTIME_STEPS = 5  # the runtime's own layers beside the env's and its apt step: records, programs, bytecode
# the base's (imagebuild/base_layers.BUDGET, 26) and the runtime's apt step split (RUNTIME_BUDGET, 8) take the rest
MOST_BUDGET = IMAGE_LAYERS - 26 - 8 - RUNTIME_STEPS


@dataclass(frozen=True)
class Distribution:
    name: str      # canonical (PEP 503)
    version: str
    wheel_bytes: int
    pure: bool     # pip: every wheel none-any; conda: noarch
    releases_per_year: int = 0  # lock/sizes.py: in the year before its series began
    channel: str = ""  # conda: the lock's channel name (a kind by channel); pip: none
    order_bytes: int = 0  # lock/sizes.py: its wheels' installed bytes when its series was first recorded
    installed_bytes: int = 0  # lock/sizes.py: this version's wheels' members uncompressed; conda: none recorded
    group_wheel_bytes: int = 0  # lock/sizes.py: its wheels when its series was first recorded (order_wheel_bytes)

    @property
    def disc_bytes(self) -> int:
        """Its installed layer's zstd bytes on a disc, estimated from its series' wheels (DISC_PER_WHEEL_BYTE):
        a patch that makes a wheel a little larger regroups nothing (a conda package: its file's)."""
        return round((self.group_wheel_bytes or self.wheel_bytes) * DISC_PER_WHEEL_BYTE[self.pure])

    @property
    def weight(self) -> int:
        """The bytes its rate is weighed by: the series' installed bytes (pip), else its file (conda)."""
        return self.order_bytes or self.wheel_bytes

    @property
    def rate(self) -> int:
        """Releases a year the plan expects: the index's count, or its kind's where it showed none."""
        return self.releases_per_year or KIND_RATES[kind_of(self.name, self.pure, self.channel)]


@dataclass(frozen=True)
class Layer:
    name: str   # the build context's folder and the COPY source: <kind>/<distribution>, <kind>/small_<n>, venv
    kind: str
    distributions: tuple[Distribution, ...]
    why: str

    @property
    def rate(self) -> int:
        return sum(d.rate for d in self.distributions)

    @property
    def wheel_bytes(self) -> int:
        return sum(d.wheel_bytes for d in self.distributions)

    @property
    def installed_bytes(self) -> int:
        return sum(d.installed_bytes for d in self.distributions)

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "why": self.why, "releases_per_year": self.rate,
                "distributions": [{"name": d.name, "version": d.version, "wheel_bytes": d.wheel_bytes,
                                   "releases_per_year": d.rate} for d in self.distributions]}


@dataclass(frozen=True)
class LayerPlan:
    layers: tuple[Layer, ...]
    budget: int
    group_bytes: int  # the disc bytes limit the plan was made with (GROUP_DISC_BYTES, or more to fit the budget)
    rest: str = REST

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(layer.name for layer in self.layers)

    def to_json(self, sizes: str) -> dict:
        return {"format": FORMAT, "budget": self.budget, "group_bytes": self.group_bytes, "sizes": sizes,
                "rest": self.rest, "layers": [layer.to_json() for layer in self.layers]}


def yearly_refeed(chain: Sequence[tuple[float, int]]) -> float:
    """Pure: (releases a year, bytes) per layer, bottom first -> the bytes a site's engine is
    expected to write again in a year: each layer's releases times the bytes of the layers above it."""
    cost, above = 0.0, 0
    for rate, size in reversed(chain):
        cost += rate * above
        above += size
    return cost


def best_order(chain: Sequence[tuple[float, int]]) -> list[tuple[float, int]]:
    """Pure: the same layers in the order of least `yearly_refeed` (fewest releases per byte lowest)."""
    return sorted(chain, key=lambda layer: layer[0] / max(layer[1], 1))


def _order_key(layer: Layer) -> tuple[int, str]:
    """Releases a year per installed byte (order_bytes; a conda package's file size), in half-octave steps."""
    weight = sum(d.weight for d in layer.distributions)
    return math.floor(math.log2(max(layer.rate, 1) / max(weight, 1)) * ORDER_STEPS), layer.name


def kind_of(name: str, pure: bool, channel: str = "") -> str:
    if channel in CHANNEL_KINDS:
        return CHANNEL_KINDS[channel]
    if name.startswith(("nvidia-", "cuda-")) or (channel and _CONDA_CUDA.match(name)):
        return "cuda"
    if _CUDA_BUILD.search(name) or name in _RAPIDS_PURE:
        return "rapids"
    return "python" if pure else "compiled"


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.0f} kB"


def _layers(distributions: list[Distribution], limit: int, rest: str) -> list[Layer]:
    out: list[Layer] = []
    for kind, changes in KINDS.items():
        mine = sorted((d for d in distributions if kind_of(d.name, d.pure, d.channel) == kind), key=lambda d: d.name)
        out += [Layer(f"{kind}/{d.name}", kind, (d,), f"alone: {_mb(d.wheel_bytes)} wheel")
                for d in mine if d.disc_bytes > limit]
        groups: list[list[Distribution]] = []
        for d in (d for d in mine if d.disc_bytes <= limit):
            if not groups or sum(g.disc_bytes for g in groups[-1]) + d.disc_bytes > limit:
                groups.append([])
            groups[-1].append(d)
        out += [Layer(f"{kind}/small_{n}", kind, tuple(group),
                      f"grouped: {changes}; {_mb(sum(d.wheel_bytes for d in group))} of wheels in {len(group)}, "
                      f"about {_mb(sum(d.disc_bytes for d in group))} on a disc")
                for n, group in enumerate(groups, 1)]
    return sorted(out, key=_order_key) + [Layer(rest, rest, (), RESTS[rest])]


def plan_layers(distributions: list[Distribution], budget: int, group_bytes: int = GROUP_DISC_BYTES,
                rest: str = REST) -> LayerPlan:
    """Pure: the env's layers in order, at most `budget` of them (the rest layer included)."""
    if budget < LEAST_BUDGET:
        raise ValueError(f"a layer budget under {LEAST_BUDGET} cannot hold every kind")
    limit = group_bytes
    layers = _layers(distributions, limit, rest)
    while len(layers) > budget:
        limit *= 2
        layers = _layers(distributions, limit, rest)
    return LayerPlan(tuple(layers), budget, limit, rest)


def lock_parts(lock_text: str, plan: LayerPlan) -> dict[str, str]:
    """Pure: one arch's hashed lock split into each planned layer's requirements (the layer's
    stage installs only those; `venv`, which no distribution names, gets none). ValueError names a
    requirement no layer holds."""
    from rapidship.lock.pip import lock_blocks
    from rapidship.lock.sizes import canonical

    layer_of = {canonical(d.name): layer.name for layer in plan.layers for d in layer.distributions}
    parts: dict[str, list[str]] = {layer.name: [] for layer in plan.layers if layer.name != plan.rest}
    for block in lock_blocks(lock_text):
        head = block[0]
        if not head or head.startswith("#"):
            continue
        name = canonical(re.split(r"[\s=<>!~;\[]", head, maxsplit=1)[0])
        if name not in layer_of:
            raise ValueError(f"{head.split()[0]} is in the lock but in no planned layer")
        parts[layer_of[name]] += block
    return {layer: "\n".join(lines) + "\n" if lines else "" for layer, lines in parts.items()}


def from_sizes(sizes: dict[str, dict]) -> list[Distribution]:
    """Pure: a wheel-sizes record's distributions (lock/sizes.py) -> the planner's input."""
    return [Distribution(name, d["version"], int(d["wheel_bytes"]), bool(d["pure"]), int(d.get("releases_per_year") or 0),
                         order_bytes=int(d.get("order_bytes") or 0), installed_bytes=int(d.get("installed_bytes") or 0),
                         group_wheel_bytes=int(d.get("order_wheel_bytes") or 0))
            for name, d in sorted(sizes.items())]


def from_conda_locks(lock_texts: list[str]) -> list[Distribution]:
    """Pure: the packages of a conda env's locks (one per arch) -> the planner's input: one plan
    serves every arch of a Dockerfile, so a package weighs its largest file of any arch. The lock
    records no installed size, so a conda env's order weighs the `.conda` files (no order_bytes)."""
    from rapidship.builder.install_lock import read_lock

    found: dict[str, Distribution] = {}
    for text in lock_texts:
        for rec in read_lock(text)[1]:
            size = int(rec.get("size") or 0)
            if rec["name"] not in found or size > found[rec["name"]].wheel_bytes:
                found[rec["name"]] = Distribution(rec["name"], rec["version"], size, bool(rec.get("noarch")),
                                                  int(rec.get("releases_per_year") or 0), rec["channel"])
    return [found[name] for name in sorted(found)]


def conda_lock_parts(lock_text: str, plan: LayerPlan) -> dict[str, str]:
    """Pure: one arch's conda lock split into each planned layer's part (a lock of the layer's
    packages). A part names only what its layer installs, so a re-lock that changes one package
    changes one part: the lock's own header (its spec digest) stays out. A layer of `noarch: python`
    packages without python gets python's record marked `"companion": true`: the installer reads the
    env's Python version from it (site-packages, entry points) and installs nothing of it.
    ValueError names a package no layer holds."""
    from rapidship.builder.install_lock import LOCK_FORMAT, read_lock

    header, records = read_lock(lock_text)
    layer_of = {d.name: layer.name for layer in plan.layers for d in layer.distributions}
    parts: dict[str, list[dict]] = {layer.name: [] for layer in plan.layers if layer.name != plan.rest}
    for rec in records:
        if rec["name"] not in layer_of:
            raise ValueError(f"{rec['name']} is in the lock but in no planned layer")
        parts[layer_of[rec["name"]]].append(rec)
    python = next((r for r in records if r["name"] == "python"), None)
    out = {}
    for layer, mine in parts.items():
        if not mine:
            out[layer] = ""
            continue
        if python is not None and python not in mine and any(r.get("noarch") == "python" for r in mine):
            mine = mine + [{**python, "companion": True}]
        head = [f"# lock-format: {LOCK_FORMAT}", f"# platform: {header.get('platform', '')}", f"# layer: {layer}"]
        out[layer] = "\n".join(head + [json.dumps(r, sort_keys=True) for r in mine]) + "\n"
    return out
