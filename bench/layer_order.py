"""Layer order benchmark: a year of patches re-fed on import, for each committed pip lock's plan, side by side.

For each env's plan (render/layer_plan.py, from locks/<env>/wheel-sizes.json) it prints the bytes a
site's engine is expected to write again in a year (each layer's releases a year times the
installed bytes above it, its wheels' members uncompressed: layer_plan.yearly_refeed) for the plan,
for the best order of the same layers and for the kind order the plan replaced (cuda, compiled,
rapids, python; inside a kind by releases), and the ratios. Pure arithmetic over committed records: no engine, no index.
Usage (project root): python3 bench/layer_order.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rapidship.config.matrix import DEFAULT_LAYER_BUDGET  # noqa: E402
from rapidship.render.layer_plan import KINDS, best_order, from_sizes, plan_layers, yearly_refeed  # noqa: E402


def figures(env: str) -> dict:
    sizes = json.loads((ROOT / "locks" / env / "wheel-sizes.json").read_text())["distributions"]
    plan = plan_layers(from_sizes(sizes), DEFAULT_LAYER_BUDGET)
    chain = [(layer.rate, layer.installed_bytes) for layer in plan.layers]
    kinds = sorted(plan.layers, key=lambda layer: ([*KINDS, plan.rest].index(layer.kind), "/small_" in layer.name,
                                                   layer.rate, layer.name))
    plan_bytes, best = yearly_refeed(chain), yearly_refeed(best_order(chain))
    kind_bytes = yearly_refeed([(layer.rate, layer.installed_bytes) for layer in kinds])
    return {"env": env, "layers": len(plan.layers), "plan_bytes": round(plan_bytes), "best_order_bytes": round(best),
            "kind_order_bytes": round(kind_bytes), "plan_vs_best": round(plan_bytes / best, 4),
            "kind_order_vs_best": round(kind_bytes / best, 4), "bottom": list(plan.names[:5])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    rows = [figures(p.parent.name) for p in sorted((ROOT / "locks").glob("*/wheel-sizes.json"))]
    for r in rows:
        print(f"{r['env']}: {r['layers']} layers; re-fed a year: plan {r['plan_bytes'] / 1e9:.1f} GB, best order "
              f"{r['best_order_bytes'] / 1e9:.1f} GB ({r['plan_vs_best']:.3f}x), the kind order "
              f"{r['kind_order_bytes'] / 1e9:.1f} GB ({r['kind_order_vs_best']:.2f}x)")
    if args.json:
        args.json.write_text(json.dumps({"note": f"installed bytes of the committed wheel-sizes records, budget {DEFAULT_LAYER_BUDGET}",
                                         "envs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
