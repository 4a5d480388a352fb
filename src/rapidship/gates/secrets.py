"""Secrets gate: build-time secrets appear in no layer, no config and no history entry.

What is looked for, and how, is `rapidship.needles`. Every layer is searched, deleted files
included, so a secret removed later is still found: from the layers' facts where the normaliser
searched them for these same needles (layerfacts.py: a keyed fingerprint of the needles says
which), else by reading the image's layers (`docker save`). Config and history are always read.
"""

from __future__ import annotations

import json
from pathlib import Path

from rapidship.gates import GateReport, verdict
from rapidship.image import ImageSnapshot, saved_image
from rapidship.layerfacts import LayerHits
from rapidship.needles import Needle, found_in_stream, needles_of, squeeze



def check_secrets(image: ImageSnapshot, ca_bundle: Path | None, values: dict[str, str],
                  unsearched: list[str] = (), layer_hits: LayerHits = None) -> GateReport:
    """`unsearched`: secrets the build used that this run has no value for: each one fails.
    `layer_hits`: what the normaliser found in every layer for these needles (None: search now)."""
    needles, cannot = needles_of(ca_bundle, values)
    unsearched = [*unsearched, *cannot]
    if not needles:  # a build with no CA bundle, tokens or credentials has nothing that can leak
        return verdict("secrets", list(unsearched), needles=0,
                       note="the build used no secrets" if not unsearched else "the build's secrets were not given")
    hits: dict[str, list[str]] = {}
    for name, where in layer_hits if layer_hits is not None else search_layers(image.ref, needles):
        hits.setdefault(name, []).append(where)
    meta = ("\n".join(image.history) + repr(image.config.get("Config", {})) + json.dumps(image.config)).encode()
    squeezed = squeeze(meta)
    for n in needles:
        if n.value in (squeezed if n.squeeze else meta):
            hits.setdefault(n.name, []).append("history/config")
    reasons = [f"{name} found in {', '.join(sorted(set(places))[:5])}" for name, places in sorted(hits.items())]
    return verdict("secrets", [*unsearched, *reasons], needles=len(needles), needle_names=sorted({n.name for n in needles}),
                   layers_read="from their facts" if layer_hits is not None else "docker save")


def search_layers(ref: str, needles: list[Needle]) -> list[tuple[str, str]]:
    """Every file of every layer (one `docker save`), and the config as saved."""
    out = []
    for kind, entry, content in saved_image(ref):
        if content is None:
            continue
        where = "image config" if kind == "config" else f"layer {entry.layer[:12]} {entry.path}"
        out += [(name, where) for name in found_in_stream(content, needles)]
    return out
