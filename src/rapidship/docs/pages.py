"""Every generated part of the docs, by page and region, and the check that they are current."""

from __future__ import annotations

from pathlib import Path

from rapidship.docs import readme, reference, regions
from rapidship.docs.figures import import_floor_table, load_images, patch_day_table, release_chain_tables, sizes_table

TASKS_PAGE = "docs/tasks.md"


def generated(root: Path, ns, matrix) -> dict[str, str]:
    """page -> its text with every generated part made afresh (docs/tasks.md is generated whole)."""
    images = load_images(root)
    parts = {
        "README.md": {"pipeline": readme.pipeline_picture(), "variants": readme.variant_table(matrix, images)},
        "docs/sizes.md": {"sizes": sizes_table(images, matrix.defaults.budget_bytes)},
        "docs/measurements/benchmarks.md": {"release-chain": release_chain_tables(root)},
        "docs/measurements/export.md": {"patch-day": patch_day_table(root), "import-floor": import_floor_table(root)},
    }
    out = {TASKS_PAGE: reference.page(ns)}
    for page, made in parts.items():
        text = (root / page).read_text()
        for name, body in made.items():
            text = regions.splice(text, page, name, body)
        out[page] = text
    return out


def stale(root: Path, ns, matrix) -> list[str]:
    """The pages whose generated parts differ from what they are made from."""
    return [page for page, text in generated(root, ns, matrix).items()
            if not (root / page).is_file() or (root / page).read_text() != text]
