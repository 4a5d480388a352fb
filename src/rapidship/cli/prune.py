"""The device-code prune task (the same stage the builder runs)."""

from __future__ import annotations


from invoke import task

from rapidship import console
from rapidship.cli.options import int_flag
from rapidship.errors import exits_cleanly


@task(name="prune", positional=["path"], iterable=["more"],
      help={"keep": "GPU architectures to keep, compute capabilities: 80,90 (A100, H100/H200)",
            "path": "ELF file, folder or .whl to prune (the first positional argument)",
            "more": "another file, folder or .whl (repeatable)",
            "out": "write pruned copies here (default: rewrite in place; wheels come back as wheels)",
            "record": "JSON record of what was kept and saved (default build/prune/prune.json)",
            "cuobjdump": "NVIDIA cuobjdump that must agree with every rewritten file (default: PATH, then "
                         "the nvidia-cuda-cuobjdump wheel)",
            "no-cuobjdump": "rely on the built-in proof alone", "jobs": "files pruned at once (default 2)"})
@exits_cleanly
def prune(c, path=None, keep=None, more=None, out=None, record="build/prune/prune.json", cuobjdump=None, no_cuobjdump=False,
          jobs="2"):  # a string: invoke's own int cast would end a bad value in a traceback
    """Prune CUDA device code to the listed GPUs: files physically smaller, each proven; JSON record."""
    from rapidship.builder.prune.host import run

    def show(entry):
        if entry["status"] != "unchanged":
            saved = entry["bytes_before"] - entry["bytes_after"]
            style = "green" if entry["status"] == "pruned" else "yellow"
            console.err.print(f"[{style}]{entry['status']:8}[/] {saved / 2**20:9.1f} MiB saved  {entry['path']}"
                              + (f"  ({entry['reason']})" if entry["reason"] else ""))

    with console.status("pruning device code"):
        rec = run(([path] if path else []) + list(more or []), keep, out, record, cuobjdump,
                  not no_cuobjdump, int_flag("--jobs", jobs), show)
    t = rec["totals"]
    console.err.print(f"kept sm {','.join(map(str, rec['keep']))}: {t['pruned']} of {t['with_device_code']} files "
                      f"with device code pruned, {t['refused']} refused; {t['bytes_before']:,} -> "
                      f"{t['bytes_after']:,} bytes in {t['seconds']} s; record: {record}")
    console.print_json(t)
