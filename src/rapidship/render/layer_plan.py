"""The env's image layers, planned per distribution from the lock at render time.

A patch of one package should ship that package's bytes: a distribution whose wheel is large gets a
layer of its own; small ones share a layer with others of their kind (the kinds change at different
rates: the CUDA release, the RAPIDS release train, compiled libraries, pure Python), packed in name
order up to GROUP_BYTES of wheels, so a patch of one re-ships at most a layer that small. If that
makes more layers than the variant's `layer_budget` (variants.yaml), the limit doubles until it fits.

The order is the import's cost: an engine keys a layer by its chain (it and every layer below), so
a patch makes the site's loader write again every layer above the lowest one it changes. So the
kinds lie from the fewest patches per byte to the most: NVIDIA's wheels (the CUDA release), compiled
libraries (each patched on its own), the RAPIDS train (all of it every two months, and its
hotfixes), pure Python (the most frequent, and small). Inside a kind, a distribution of its own
layer lies higher the more releases the index showed in the year before its series began
(lock/sizes.py: the cuDF family's hotfixes put it above cuML's and UCX's), then by name; not by
size: N and N+1 must plan alike for a delta to stay small, and a size order moved layers when a
patch changed a wheel's size a little (a test shows it). Groups of small ones lie on top of their
kind, in name order.

Pure core: `plan_layers(distributions, budget)`. The plan is data (`to_json`): render writes it into
the build context (builder/layer-plan.json), splits each arch's lock by it (`lock_parts`: one
requirements file per layer) and names one builder stage and one COPY per layer in the Dockerfile;
each stage installs only its layer's wheels (builder/install_layer.py), so a one-package patch
rebuilds one layer; builder/layer_record.py merges what each layer holds into the plan, which the
image keeps (/opt/rapidship/layers.json) and `invoke size-report` shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FORMAT = 1
# A grouped distribution's patch re-ships its whole group: the goal (docs/export.md) allows 2 MB
# beyond 1.25 x its own bytes. Wheels carry no bytecode, which the env compiles (about as large
# again, compressed): half a MB of wheels stays near 1 MB on a disc.
GROUP_BYTES = 512 * 1024
REST = "venv"  # the venv itself (bin/python, pyvenv.cfg) and whatever no RECORD names: always the last layer
KINDS = {  # in layer order, the most bytes per patch first; why they are grouped apart
    "cuda": "changes with the CUDA release (NVIDIA's wheels)",
    "compiled": "compiled code, changes with its own releases",
    "rapids": "changes with the RAPIDS release train and its hotfixes",
    "python": "pure Python, the most frequent patches",
}
_CUDA_BUILD = re.compile(r"-cu\d+$")
_RAPIDS_PURE = {"dask-cuda", "rapids-dask-dependency", "rapids-logger", "distributed-ucxx", "dask-cudf"}
LEAST_BUDGET = len(KINDS) + 1  # one group per kind and the venv: any lock fits
MOST_BUDGET = 80  # overlay2 refuses more than ~125 layers: room for the base's (imagebuild/base_layers.BUDGET) and the runtime's own


@dataclass(frozen=True)
class Distribution:
    name: str      # canonical (PEP 503)
    version: str
    wheel_bytes: int
    pure: bool
    releases_per_year: int = 0  # lock/sizes.py: in the year before its series began


@dataclass(frozen=True)
class Layer:
    name: str   # the build context's folder and the COPY source: <kind>/<distribution>, <kind>/small_<n>, venv
    kind: str
    distributions: tuple[Distribution, ...]
    why: str

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "why": self.why,
                "distributions": [{"name": d.name, "version": d.version, "wheel_bytes": d.wheel_bytes}
                                  for d in self.distributions]}


@dataclass(frozen=True)
class LayerPlan:
    layers: tuple[Layer, ...]
    budget: int
    group_bytes: int  # the limit the plan was made with (GROUP_BYTES, or more to fit the budget)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(layer.name for layer in self.layers)

    def to_json(self, sizes: str) -> dict:
        return {"format": FORMAT, "budget": self.budget, "group_bytes": self.group_bytes, "sizes": sizes,
                "rest": REST, "layers": [layer.to_json() for layer in self.layers]}


def kind_of(name: str, pure: bool) -> str:
    if name.startswith(("nvidia-", "cuda-")):
        return "cuda"
    if _CUDA_BUILD.search(name) or name in _RAPIDS_PURE:
        return "rapids"
    return "python" if pure else "compiled"


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.0f} kB"


def _layers(distributions: list[Distribution], limit: int) -> list[Layer]:
    out: list[Layer] = []
    for kind, changes in KINDS.items():
        mine = sorted((d for d in distributions if kind_of(d.name, d.pure) == kind), key=lambda d: d.name)
        out += [Layer(f"{kind}/{d.name}", kind, (d,), f"alone: {_mb(d.wheel_bytes)} wheel")
                for d in sorted((d for d in mine if d.wheel_bytes > limit), key=lambda d: (d.releases_per_year, d.name))]
        groups: list[list[Distribution]] = []
        for d in (d for d in mine if d.wheel_bytes <= limit):
            if not groups or sum(g.wheel_bytes for g in groups[-1]) + d.wheel_bytes > limit:
                groups.append([])
            groups[-1].append(d)
        out += [Layer(f"{kind}/small_{n}", kind, tuple(group),
                      f"grouped: {changes}; {_mb(sum(d.wheel_bytes for d in group))} of wheels in {len(group)}")
                for n, group in enumerate(groups, 1)]
    return out + [Layer(REST, REST, (), "the venv itself (bin/, pyvenv.cfg) and files no RECORD names")]


def plan_layers(distributions: list[Distribution], budget: int, group_bytes: int = GROUP_BYTES) -> LayerPlan:
    """Pure: the env's layers in order, at most `budget` of them (the venv's included)."""
    if budget < LEAST_BUDGET:
        raise ValueError(f"a layer budget under {LEAST_BUDGET} cannot hold every kind")
    limit = group_bytes
    layers = _layers(distributions, limit)
    while len(layers) > budget:
        limit *= 2
        layers = _layers(distributions, limit)
    return LayerPlan(tuple(layers), budget, limit)


def lock_parts(lock_text: str, plan: LayerPlan) -> dict[str, str]:
    """Pure: one arch's hashed lock split into each planned layer's requirements (the layer's
    stage installs only those; `venv`, which no distribution names, gets none). ValueError names a
    requirement no layer holds."""
    from rapidship.lock.pip import lock_blocks
    from rapidship.lock.sizes import canonical

    layer_of = {canonical(d.name): layer.name for layer in plan.layers for d in layer.distributions}
    parts: dict[str, list[str]] = {layer.name: [] for layer in plan.layers if layer.name != REST}
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
    return [Distribution(name, d["version"], int(d["wheel_bytes"]), bool(d["pure"]), int(d.get("releases_per_year") or 0))
            for name, d in sorted(sizes.items())]
