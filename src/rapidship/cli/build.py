"""Tasks that make and measure images: local bases, BuildKit builds, image gates, size report."""

from __future__ import annotations

from pathlib import Path

from rapidship.cli.options import task

from rapidship import console
from rapidship.cli.options import ARCH_DEFAULT, VARIANTS_HELP, arch_flag, arches_flag, int_flag
from rapidship.config.matrix import load_matrix
from rapidship.errors import GateFailure, exits_cleanly
from rapidship.records import Workspace


@task(name="base", iterable=["apt_source"],
      help={"os": "OS key from variants.yaml (Debian family), e.g. debian12",
            "arch": "amd64 or arm64 (default: this machine's)",
            "mirror": "Debian/Ubuntu archive URL (default: the distro's public archive)",
            "conda_builder": "make the conda builder stand-in (python3 + venv) instead of the OS base",
            "apt-source": "one more apt source, one sources.list line, whose newer versions win (repeatable): a "
                          "security suite or the site's own repository, e.g. 'deb [trusted=yes] http://127.0.0.1:8000/ ./'",
            "force": "rebuild even when this run's base exists", **VARIANTS_HELP})
@exits_cleanly
def base_image(c, os="debian12", arch=None, mirror=None, conda_builder=False, apt_source=None, force=False,
               variants_file="variants.yaml"):
    """Bootstrap a Debian-family base image with mmdebstrap.
    One archive state gives one image id, under this run's own name; writes
    build/bases/<name>-<arch>[-<run>].json, the record invoke build takes it by."""
    from rapidship.config.matrix import run_id
    from rapidship.engine import ENGINE
    from rapidship.errors import ConfigError
    from rapidship.imagebuild.base import bootstrap, differences, host_arch, plan_base, read_base

    plan = plan_base(load_matrix(variants_file), os, arch_flag(arch or host_arch()), mirror, conda_builder,
                     tuple(apt_source or ()))
    ws, run = Workspace(), run_id()
    existing = read_base(ws, plan.ref, plan.arch.value, run)
    there = ENGINE.try_inspect(existing.ref) if existing else None
    if existing and there and there.get("Id") == existing.image_id and not force:
        changed = differences(plan, (there.get("Config") or {}).get("Labels"))
        if changed and (mirror is not None or apt_source):  # asked for something else: never a silent no-op
            raise ConfigError("--apt-source" if apt_source else "--mirror", f"{existing.ref} ({plan.arch.value}) exists, made otherwise: "
                              + "; ".join(changed), "pass --force to rebuild it with these flags")
        console.err.print(f"{existing.ref} ({plan.arch.value}) exists as {existing.image_id[:19]}"
                          + (f" ({'; '.join(changed)})" if changed else ", made with these flags") + "; --force to rebuild")
        return
    ws.root.mkdir(exist_ok=True)
    log = ws.root / f"base-{os}-{plan.arch.value}.log"
    with console.status(f"mmdebstrap {plan.suite} {plan.arch.value} from {plan.mirror} (log: {log})",
                        detail=lambda: console.last_line(log)):
        made = bootstrap(plan, ws.root, log, run)
    path = ws.save(ws.base(plan.ref, plan.arch.value, run), made)
    console.err.print(f"made {made.ref} ({made.arch}) in {made.seconds}s, rootfs {made.rootfs_bytes / 1e6:.0f} MB: "
                      f"image id {made.image_id} ({len(made.inputs.packages)} packages, {plan.suite} of "
                      f"{made.inputs.archive_date or 'an undated archive'}) -> {path}")


BUILD_INPUTS_HELP = {
    "ca-bundle": "PEM bundle for TLS-intercepting proxies (a BuildKit secret; default $RAPIDSHIP_CA_BUNDLE or $SSL_CERT_FILE)",
    "pip-index": "PyPI mirror URL, may carry a token (a BuildKit secret; default $RAPIDSHIP_PIP_INDEX_URL)",
    "conda-channel": "conda channel mirror URL (repeatable; a BuildKit secret; default $RAPIDSHIP_CONDA_CHANNELS)",
    "network": "network of the RUN steps: host reaches mirrors on this machine's 127.0.0.1 (default: the engine's)"}


@task(iterable=["conda_channel"],
      help={"variant": "variant id", "arch": f"amd64, arm64 or all ({ARCH_DEFAULT})",
            **BUILD_INPUTS_HELP,
            "no-cache": "rebuild every step (download caches stay): e.g. to check that a lock rebuilds to the same "
                        "content manifest", **VARIANTS_HELP})
@exits_cleanly
def build(c, variant="cpu-debian12", arch=None, ca_bundle=None, pip_index=None, conda_channel=None, network=None,
          no_cache=False, variants_file="variants.yaml"):
    """Render and build a variant with BuildKit; writes build/<variant>/build-<arch>.json."""
    from rapidship.stages.build import build as build_stage

    build_stage(variant, arches_flag(load_matrix(variants_file).get(variant), arch), ca_bundle, pip_index,
                conda_channel, network, no_cache, variants_file)


@task(iterable=["conda_channel"],
      help={"variant": "variant id", "digest": "the image id to reproduce, sha256:<64 hex> (a disc's record, the "
                                               "config a signed manifest names, docker images --no-trunc)",
            "arch": "amd64 or arm64 (default: this machine's arch)",
            "record": "the build record naming the inputs (default build/<variant>/build-<arch>.json)",
            "keep": "keep the rebuilt image in the engine (default: removed after the comparison)",
            **{k: BUILD_INPUTS_HELP[k] for k in ("ca-bundle", "pip-index", "conda-channel", "network")}, **VARIANTS_HELP})
@exits_cleanly
def reproduce(c, variant, digest, arch=None, record=None, keep=False, ca_bundle=None, pip_index=None,
              conda_channel=None, network=None, variants_file="variants.yaml"):
    """Rebuild an image from its recorded inputs, without cache, and compare.
    The inputs are the build record's commit, SOURCE_DATE_EPOCH, lock and bases; says "reproduced" or
    names each config field and file that differs; writes reproduce-<arch>.json."""
    import time
    from dataclasses import replace

    from rapidship.engine import ENGINE
    from rapidship.errors import ConfigError
    from rapidship.imagebuild.base import host_arch
    from rapidship.imagebuild.buildkit import BuildSecrets, build as build_image, plan_build, read_record
    from rapidship.imagebuild.reproduce import DIGEST, differences, input_problems, listing, recorded_bases
    from rapidship.records import BuiltImage, Reproduction
    from rapidship.render.dockerfile import render as render_variant

    if not DIGEST.match(digest or ""):
        raise ConfigError("--digest", f"{digest!r} is not sha256:<64 hex>", "pass the image id (config digest) to check")
    v = load_matrix(variants_file).get(variant)
    a = arch_flag(arch or host_arch())
    ws = Workspace()
    source = Path(record) if record else ws.build(v.id, a.value)
    rec = ws.load(source, BuiltImage, f"invoke build --variant {v.id} --arch {a.value}", "build record") if record \
        else read_record(ws, v.id, a.value)
    if (rec.variant, rec.arch) != (v.id, a.value):
        raise ConfigError("--record", f"{source} is the build record of {rec.variant} {rec.arch}",
                          f"pass the record of {v.id} {a.value}")
    rendered = render_variant(v)
    head = c.run("git rev-parse HEAD", hide=True, warn=True).stdout.strip()
    dirty = bool(c.run("git status --porcelain --untracked-files=no", hide=True, warn=True).stdout.strip())
    bases, base_problems = recorded_bases(ws, v, a, rec)
    if problems := input_problems(rec, head, dirty, rendered.lock_sha256) + base_problems:
        raise ConfigError(str(source), "cannot rebuild from the recorded inputs: " + "; ".join(problems),
                          "bring each input named back, then run invoke reproduce again")
    secrets = BuildSecrets.from_flags(ca_bundle, pip_index, conda_channel)
    plan = plan_build(v, a, rendered, secrets, rec.extra["revision"], no_cache=True, network=network,
                      epoch=rec.extra["source_date_epoch"])
    plan = replace(plan, ref=f"{plan.ref}-reproduce", base_args=bases)
    log = ws.variant_dir(v.id) / f"reproduce-{a.value}.log"
    start = time.monotonic()
    try:
        with console.status(f"rebuilding {plan.ref} without cache (log: {log})",
                            detail=lambda: console.last_line(log)) as status:
            rebuilt = build_image(plan, secrets, v, log, on_step=lambda s: status.update(f"{plan.ref}: {s}"))
            found: list[str] = []
            if rebuilt.image_id != digest:
                status.update(f"listing what differs between {digest[:19]} and {rebuilt.image_id[:19]}")
                found = differences(listing(digest), listing(plan.ref)) if ENGINE.try_inspect(digest) else [
                    f"the image {digest[:19]} is not in this engine: load it (docker load, invoke import) and run "
                    "again to list each field and file that differs"]
    finally:
        if not keep:
            ENGINE.remove_images(plan.ref)
    result = Reproduction(variant=v.id, arch=a.value, digest=digest, rebuilt_id=rebuilt.image_id,
                          reproduced=rebuilt.image_id == digest, source_date_epoch=plan.epoch, revision=plan.revision,
                          seconds=round(time.monotonic() - start, 1), differences=found)
    path = ws.save(ws.reproduce(v.id, a.value), result)
    if result.reproduced:
        console.err.print(f"reproduced: {digest} ({v.id} {a.value}, commit {plan.revision[:12]}, "
                          f"SOURCE_DATE_EPOCH={plan.epoch}, {result.seconds}s) -> {path}")
        return
    console.table(f"{digest[:19]} (shipped) vs {rebuilt.image_id[:19]} (rebuilt)", ["what differs"],
                  [(line,) for line in found])
    raise GateFailure(f"reproduce {v.id} {a.value}", f"not reproduced: rebuilt {rebuilt.image_id}, not {digest}",
                      f"each difference is listed above and in {path}")


@task(iterable=["conda_channel"],
      help={"variant": "variant id", "arch": f"amd64, arm64 or all ({ARCH_DEFAULT})",
            "ca-bundle": "the CA bundle the build used (default $RAPIDSHIP_CA_BUNDLE or $SSL_CERT_FILE): its private certs must not leak",
            "pip-index": "the index URL the build used (default $RAPIDSHIP_PIP_INDEX_URL)",
            "conda-channel": "a conda channel mirror the build used (repeatable; default $RAPIDSHIP_CONDA_CHANNELS): "
                             "its credentials must not leak",
            "reread": "read the image whole (one docker export) even where the build noted its layers' facts",
            **VARIANTS_HELP})
@exits_cleanly
def gates(c, variant="cpu-debian12", arch=None, ca_bundle=None, pip_index=None, reread=False,
          variants_file="variants.yaml", conda_channel=None):
    """Run the image gates (size, labels, user, suid, secrets) on a built image; writes gates-<arch>.json."""
    from rapidship.stages.build import gates as gates_stage

    gates_stage(variant, arches_flag(load_matrix(variants_file).get(variant), arch), ca_bundle, pip_index, reread,
                variants_file, conda_channel or None)


@task(name="size-report",
      help={"variant": "variant id", "arch": "amd64 or arm64 (default: every arch of the variant with a build record)",
            "top": "how many of the largest paths to list (default 25)", "json": "print the report as JSON on stdout",
            "delta-cost": "also measure, for every distribution, the zstd bytes a delta disc carries if only it "
                          "changed, against its own (reads the image once more; fails above 1.25 x own + 2 MB)",
            **VARIANTS_HELP})
@exits_cleanly
def size_report(c, variant, arch=None, top="25", json=False, delta_cost=False, variants_file="variants.yaml"):  # str: see int_flag
    """Largest paths of a built image, the env's layer plan, what the trims saved, sizes against the budget."""
    from rapidship.imagebuild.buildkit import read_record
    from rapidship.imagebuild.size_report import report, write_report

    v = load_matrix(variants_file).get(variant)
    ws = Workspace()
    arches = [arch_flag(arch)] if arch else ws.built_arches(v.id, v.arches)
    if not arches:
        from rapidship.errors import ConfigError
        raise ConfigError(str(ws.variant_dir(v.id)), "no build record", f"run invoke build --variant {v.id} first")
    failed, missed = [], []
    for a in arches:
        built = read_record(ws, v.id, a.value)
        with console.status(f"reading {built.ref} (docker export)"):
            rep = report(built.ref, variant=v.id, arch=a.value, image_bytes=built.size_bytes,
                         zstd_bytes=built.zstd_bytes, budget_bytes=v.budget_bytes, top=int_flag("--top", top))
        if delta_cost:
            from rapidship.imagebuild.delta_cost import measure, summary

            with console.status(f"delta cost of each distribution of {built.ref} (docker save, zstd -3 per layer)"):
                rates = {layer["name"]: layer["releases_per_year"] for layer in rep.layers.get("layers", [])
                         if layer["releases_per_year"]}  # an image planned before rates were kept: none
                rep.delta_cost = summary(*measure(built.ref), rates=rates)
        path = write_report(ws, rep)
        if json:
            console.print_json(rep.to_json())
        else:
            _print_size_report(rep)
        console.err.print(f"record: {path}")
        if not rep.within_budget:
            failed.append(f"{v.id} {a.value}")
        if rep.delta_cost.get("misses"):
            worst = rep.delta_cost["worst"]
            missed.append(f"{v.id} {a.value}: {rep.delta_cost['misses']} of {rep.delta_cost['distributions']} "
                          f"distributions, worst {worst['distribution']} {worst['carried_bytes']:,} B carried for "
                          f"{worst['own_bytes']:,} B of its own ({worst['ratio']}x)")
    if failed:
        raise GateFailure("size-report", f"over the budget: {', '.join(failed)}", "trim the env (docs/sizes.md)")
    if missed:
        raise GateFailure("size-report --delta-cost", f"a patch of one package re-ships more than "
                          f"{rep.delta_cost['goal']}: {'; '.join(missed)}",
                          "the rows above name each package's layers: lower layer_budget's pressure or re-plan "
                          "(docs/sizes.md, layers)")


def _print_size_report(rep):
    gb = lambda n: f"{n / 1e9:.3f} GB" if n is not None else "-"  # noqa: E731
    console.table(f"{rep.ref}: largest directories", ["path", "size"], [(p.path, gb(p.bytes)) for p in rep.largest_dirs])
    console.table("largest files", ["path", "size"], [(p.path, gb(p.bytes)) for p in rep.largest_files])
    if rep.trims:
        t = rep.trims
        why = t.get("why") or {}  # images built before trims carried their reasons have none
        rows = [(pattern, gb(size), why.get(pattern, "")) for pattern, size in sorted(t["patterns"].items(), key=lambda kv: -kv[1])]
        console.table(f"trims ({t['style']}): {gb(t['trimmed_bytes'])} of {gb(t['before_bytes'])} saved; "
                      f"*.pyc kept: {gb(t['pyc_bytes'])}", ["pattern", "saved", "why"], rows)
    if rep.prune:
        p = rep.prune["totals"]
        console.table(f"device code pruned to sm {','.join(map(str, rep.prune['keep']))}: {gb(p['saved_bytes'])} saved "
                      f"({p['pruned']} of {p['with_device_code']} files, {p['refused']} left whole)",
                      ["file", "status", "before", "after", "note"],
                      [(f["path"].rsplit("/", 1)[-1], f["status"], gb(f["bytes_before"]),
                        gb(f["bytes_after"]), f["reason"] or (f["layout"] or "").split(" (")[0])
                       for f in rep.prune["files"]])
        by_arch = [(a, gb(b), gb(p["arch_after"].get(a, 0))) for a, b in p["arch_before"].items()]
        console.table("device code by architecture", ["arch", "before", "kept"], by_arch)
        if left := rep.prune.get("left"):
            console.table(f"device code no listed GPU loads, wherever it lies: {gb(left['for_no_listed_gpu_bytes'])} of "
                          f"{gb(left['container_bytes'])} in {left['files_with_device_code']} distinct files "
                          f"({left['copies_counted_once']} copies counted once)",
                          ["file", "section", "left", "archs", "why"],
                          [(s["path"].rsplit("/", 1)[-1] + (f" (+{s['copies']} copies)" if s["copies"] else ""),
                            s["section"], f"{s['bytes']:,} B", ", ".join(s["by_arch"]), s["why"]) for s in left["sections"]])
    if rep.layers:
        console.table(f"the env's layers ({len(rep.layers['layers'])} of a budget of {rep.layers['budget']}; small "
                      f"distributions grouped up to {rep.layers['group_bytes']:,} B of wheels; sizes: {rep.layers['sizes']})",
                      ["layer", "why", "files", "size", "distributions"],
                      [(layer["name"], layer["why"], f"{layer['files']:,}", gb(layer["bytes"]),
                        ", ".join(layer["distributions"])) for layer in rep.layers["layers"]])
    if rep.delta_cost and not rep.delta_cost["rows"]:
        console.err.print("delta cost: no distribution with a RECORD in this image (a conda env is one layer, "
                          "conda-pack's: a patch of any package ships it whole)")
    elif rep.delta_cost:
        d = rep.delta_cost
        console.table(f"delta cost: a patch of one distribution re-ships (goal {d['goal']}; {d['misses']} of "
                      f"{d['distributions']} miss it)", ["distribution", "carried (zstd)", "own (zstd)", "ratio", "goal",
                                                     "re-fed on import (tar)"],
                      [(r["distribution"], f"{r['carried_bytes']:,}", f"{r['own_bytes']:,}", f"{r['ratio']:.2f}x",
                        "ok" if r["within_goal"] else "[red]MISS[/]", f"{r.get('refed_bytes', 0):,}") for r in d["rows"]])
        if year := d.get("per_year"):
            from rapidship.imagebuild.delta_cost import per_year_words

            console.err.print(per_year_words(year))
    verdict = "[green]within[/]" if rep.within_budget else "[red]OVER[/]"
    console.err.print(f"image {gb(rep.image_bytes)} (uncompressed), zstd -3 {gb(rep.zstd_bytes)}, budget "
                      f"{gb(rep.budget_bytes)}: {verdict}, headroom {rep.headroom_bytes:,} bytes")
