"""invoke entry point: assembles the task collections of src/rapidship/cli/, nothing else.

Each collection parses flags into typed values and calls one stage; see `invoke --list`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "src"))  # run from a checkout without installing

from invoke import Collection, Task  # noqa: E402

from rapidship.cli import (build, ci, deploy, docs, export, harbor, prepare, prune, publish, registry,  # noqa: E402
                           release, report, scan, sign, smoke)
from rapidship.cli.options import bad_flags_exit_2  # noqa: E402

bad_flags_exit_2(Path(__file__).parent)
ns = Collection()
for module in (prepare, build, prune, scan, publish, sign, smoke, export, report, release, deploy):
    for value in vars(module).values():
        if isinstance(value, Task) and value.__module__ == module.__name__:
            ns.add_task(value)
ns.add_collection(harbor.harbor_tasks)
ns.add_collection(ci.ci_tasks)
ns.add_collection(sign.keys_tasks)
ns.add_collection(sign.trust_tasks)
ns.add_collection(registry.registry_tasks)
ns.add_collection(docs.docs_tasks(ns))  # the generator reads this collection: handed in, not imported back
