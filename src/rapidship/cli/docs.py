"""`invoke docs.*`: the docs' generated parts (task reference, README picture and tables, sizes)."""

from __future__ import annotations

from pathlib import Path

from invoke import Collection

from rapidship import console
from rapidship.cli.options import VARIANTS_HELP, task
from rapidship.errors import GateFailure, exits_cleanly


def docs_tasks(project: Collection) -> Collection:
    """`invoke docs.*` over `project`, the collection invoke runs (tasks.py hands in its own, so the
    generator reads every task's help without importing tasks.py back)."""

    @task(name="generate", help={"check": "write nothing; exit 1 naming each page whose generated parts are stale",
                                 **VARIANTS_HELP})
    @exits_cleanly
    def docs_generate(c, check=False, variants_file="variants.yaml"):
        """Write docs/tasks.md from every task's --help, and the README's and docs/sizes.md's generated parts."""
        from rapidship.config.matrix import load_matrix
        from rapidship.docs.pages import generated, stale

        root, m = Path.cwd(), load_matrix(variants_file)
        if check:
            if bad := stale(root, project, m):
                raise GateFailure(", ".join(bad), "generated parts differ from what they are made from",
                                  "run invoke docs.generate and commit the pages")
            console.err.print("docs: every generated part is current")
            return
        for page, text in generated(root, project, m).items():
            if not (root / page).is_file() or (root / page).read_text() != text:
                (root / page).write_text(text)
                console.err.print(f"wrote {page}")

    return Collection("docs", docs_generate)
