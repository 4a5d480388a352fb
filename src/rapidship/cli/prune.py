"""The device-code prune task (the same stage the builder runs)."""

from __future__ import annotations


from rapidship.cli.options import task

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


@task(name="device-code", help={"variant": "the CUDA variant whose built image to read", "arch": "amd64 or arm64",
                                "variants-file": "the matrix (default variants.yaml)"})
@exits_cleanly
def device_code(c, variant="cuda12-debian12", arch="amd64", variants_file="variants.yaml"):
    """Record which GPUs the locked wheels carry device code for.
    Read from the built image's prune record and written beside the lock, so render refuses a
    gpu_archs GPU they cannot run on."""
    import json
    from pathlib import Path

    from rapidship.cli.options import arch_flag
    from rapidship.config.matrix import load_matrix
    from rapidship.errors import ConfigError
    from rapidship.imagebuild.buildkit import read_record
    from rapidship.imagebuild.size_report import PRUNE_PATH, image_entries
    from rapidship.records import Rendered, Workspace
    from rapidship.render import coverage
    from rapidship.render.dockerfile import LOCKS, arch_lock_name

    v = load_matrix(variants_file).get(variant)
    a = arch_flag(arch).value
    ws = Workspace()
    built = read_record(ws, v.id, a)
    rendered = ws.load(ws.render(v.id), Rendered, f"invoke render --variant {v.id}")
    if built.lock_sha256 != rendered.lock_sha256:
        raise ConfigError(f"--variant {v.id}", f"the {a} image was built from lock {built.lock_sha256[:12]}..., "
                          f"the rendered one is {rendered.lock_sha256[:12]}...", f"build it again: invoke build --variant {v.id} --arch {a}")
    _, kept = image_entries(built.image_id, keep={PRUNE_PATH})
    if PRUNE_PATH not in kept:
        raise ConfigError(f"--variant {v.id}", f"the {a} image carries no prune record (/{PRUNE_PATH})",
                          "set gpu_archs for this variant and build it")
    lock = Path(rendered.out_dir) / "lock" / arch_lock_name(v, a)
    doc = coverage.from_prune_record(json.loads(kept[PRUNE_PATH]), v.env, a, lock.read_bytes())
    out = coverage.coverage_path(LOCKS, v.env, a)
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    console.err.print(f"{len(doc['files'])} libraries with device code in the {v.env} lock for {a} -> {out}")
