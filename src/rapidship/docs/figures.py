"""Measured image sizes: one JSON record per image under docs/measurements/images/, and the tables
the docs show, made from them (budget headroom is computed against variants.yaml, never typed)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

IMAGES = Path("docs/measurements/images")


@dataclass(frozen=True)
class ImageSize:
    name: str                       # the record's file stem
    date: str
    variant: str
    arch: str
    gpu_archs: object               # [80, 90], "all" or None (a CPU image)
    size_bytes: int
    zstd_bytes: int | None
    layers: int | None
    build: str | None
    what: str
    approximate: bool = False

    @property
    def archs_label(self) -> str:
        if self.gpu_archs is None:
            return "none"
        return self.gpu_archs if isinstance(self.gpu_archs, str) else "[" + ", ".join(map(str, self.gpu_archs)) + "]"


def load_images(root: Path) -> dict[str, ImageSize]:
    out = {}
    for path in sorted((root / IMAGES).glob("*.json")):
        raw = json.loads(path.read_text())
        out[path.stem] = ImageSize(path.stem, raw["date"], raw["variant"], raw["arch"], raw["gpu_archs"],
                                   raw["size_bytes"], raw.get("zstd_bytes"), raw.get("layers"), raw.get("build"),
                                   raw["what"], raw.get("approximate", False))
    return out


def gb(n: int, places: int = 2) -> str:
    return f"{n / 1e9:.{places}f} GB"


def sizes_table(images: dict[str, ImageSize], budget: int) -> str:
    rows = ["| image | arch | `gpu_archs` | uncompressed | zstd -3 | budget headroom | layers | measured | build |",
            "|---|---|---|---:|---:|---:|---:|---|---|"]
    for r in sorted(images.values(), key=lambda r: (r.approximate, r.variant, r.size_bytes)):
        size = f"~{r.size_bytes:,}" if r.approximate else f"**{r.size_bytes:,}**"
        room = "" if r.approximate else f"{budget - r.size_bytes:+,}"
        rows.append(f"| `{r.variant}` | {r.arch} | {r.archs_label} | {size} | "
                    f"{'' if r.zstd_bytes is None else f'{r.zstd_bytes:,}'} | {room} | {r.layers or ''} | "
                    f"{r.date} ([record]({IMAGES.relative_to('docs').as_posix()}/{r.name}.json)) | {r.build or ''} |")
    return "\n".join(rows)


def measured(images: dict[str, ImageSize], variant: str, gpu_archs: tuple[int, ...] | None) -> str:
    """The README's cell: each arch's size as variants.yaml builds it now (its gpu_archs)."""
    want = None if gpu_archs is None else list(gpu_archs)
    found = sorted((r for r in images.values() if r.variant == variant and r.gpu_archs == want), key=lambda r: r.arch)
    return ", ".join(f"{gb(r.size_bytes)} {r.arch}" for r in found) or "not built here"


RELEASE_CHAIN = Path("docs/measurements")  # the records, and the pages the tables below go on
PATCH_GOAL_S = 300  # issue: one package bumped, delta disc verified, under 5 minutes on a 2-core machine


def release_chain_tables(root: Path) -> str:
    """Per record of the newest `release-chain-DATE/` folder (bench/release_chain.py --json): the
    machine's rates, then each release's stages against their floors."""
    folders = sorted((root / RELEASE_CHAIN).glob("release-chain-*"))
    if not folders:
        return "No release chain measured yet."
    out = []
    for path in sorted(folders[-1].glob("*.json"), key=lambda p: (p.stem.removesuffix("-patch"), p.stem)):
        rec = json.loads(path.read_text())
        rel = path.relative_to(root / RELEASE_CHAIN).as_posix()
        rates = ", ".join(f"{k} {v / 1e6:,.0f} MB/s" for k, v in rec["rates_bytes_per_s"].items())
        note = f" {rec['note'].rstrip('.')}." if rec.get("note") else ""
        patch = f"; the patch release pins `{rec['patch']}`" if rec.get("patch") else ""
        flavour = f", {rec['flavour']}" if rec.get("flavour") else ""
        out.append(f"**`{rec['variant']}` {rec['arch']}{flavour}** ({folders[-1].name[len('release-chain-'):]}, "
                   f"[record]({rel}){patch}); rates measured in the run: {rates}.{note}")
        for name, r in rec["releases"].items():
            s = r["sizes"]
            archive = f"{s['archive'] / 1e6:,.1f} MB" if s["archive"] >= 1e6 else f"{s['archive']:,} B"
            wrote = "; ".join(f"{arch}: the normaliser wrote {n['layers_rewritten']} built layers and left "
                              f"{n.get('layers_reused', 0)} to the engine" for arch, n in (r.get("normalised") or {}).items()
                              if "layers_rewritten" in n and r["stages"][0]["verdict"] == "pass")  # it built
            out += ["", f"{name.capitalize()} release (image {s['image'] / 1e6:,.0f} MB, disc archive {archive}), "
                        f"chain {r['chain_s']:.1f} s{f' ({wrote})' if wrote else ''}:", "",
                    "| stage | verdict | seconds | floor | ratio | floor counts |", "|---|---|---:|---:|---:|---|"]
            for st in r["stages"]:
                floor = "-" if st["floor_s"] is None else f"{st['floor_s']:.2f}"
                ratio = "-" if st["ratio"] is None else f"{st['ratio']:.1f}x"
                out.append(f"| {st['stage']} | {st['verdict']} | {st['seconds']:.1f} | {floor} | {ratio} | "
                           f"{st['floor_counts']} |")
            if name == "patch" and rec.get("patch_first_build") is False:  # its builder stage came from the cache
                out += ["", f"Not a measure of the {PATCH_GOAL_S // 60}-minute goal: the patched lock's builder stage "
                            "was in the build cache (the note above)."]
            elif name == "patch":
                met = r["chain_s"] < PATCH_GOAL_S
                out += ["", f"The goal of a patch release under {PATCH_GOAL_S // 60} minutes: "
                            f"**{'met' if met else 'missed'}** ({r['chain_s']:.1f} s)."]
        out.append("")
    return "\n".join(out).rstrip("\n")


PATCH_DAY = "patch-day-*"


def newest_records(root: Path, pattern: str) -> list[tuple[str, dict]]:
    """The records of the newest folder `pattern` names under docs/measurements, each with its link
    from there, in name order; [] when none is measured yet."""
    folders = sorted((root / RELEASE_CHAIN).glob(pattern))
    return [(path.relative_to(root / RELEASE_CHAIN).as_posix(), json.loads(path.read_text()))
            for path in sorted(folders[-1].glob("*.json"))] if folders else []


def patch_day_table(root: Path) -> str:
    """The newest `patch-day-DATE/` folder's records (bench/patch_layers.py, bench/debian_update.py
    --json, one per real patch): each disc's bytes against the changed packages' own, and the
    site's import against the goal."""
    records = newest_records(root, PATCH_DAY)
    if not records:
        return "No patch day measured yet."
    out = ["| case | image | own (zstd) | full N+1 disc | delta disc | delta / own | import: full, delta (goal) | "
           "layers the import keeps / re-feeds |", "|---|---|---:|---:|---:|---:|---|---|"]
    for link, rec in records:
        full, delta = rec["runs"]["N+1 full"]["archive_bytes"], rec["runs"]["N+1 delta"]["archive_bytes"]
        imp = rec["imports"]
        said = imp["delta_said"].removeprefix("delta disc: ").split(" from docker save")[0]
        kept, _, refed = said.partition("; ")
        out.append(f"| [{rec['case']}]({link}): {rec['changed']} | "
                   f"`{rec['variant']}` {rec['arch']} | {rec['own_zstd_bytes']:,} | {full:,} | **{delta:,}** | "
                   f"{delta / rec['own_zstd_bytes']:.2f}x | {imp['full_import_s']:.1f} s, **{imp['delta_import_s']:.1f} s** "
                   f"({imp['goal_s']:.1f} s: {'met' if imp['met'] else 'missed'}) | "
                   f"{kept.split(' layer')[0]} / {refed.split(' read')[0]} |")
    return "\n".join(out)


IMPORT_FLOOR = "import-floor-*"


def import_floor_table(root: Path) -> str:
    """The newest `import-floor-DATE/` folder's records (bench/patch_layers.py and
    bench/debian_update.py --import --json, one per real patch, each run alone): each import against
    its floor (1.5 x writing the bytes whose chain the engine lacks, at the disk rate measured in the
    same run, + 5 s) and docker's loader alone on the delta's re-fed layers."""
    records = newest_records(root, IMPORT_FLOOR)
    if not records:
        return "No import measured against its floor yet."
    out = ["| case | image | re-fed: full, delta (tar) | disk rate | import: full (floor goal) | import: delta (floor goal) "
           "| docker load alone, delta's layers |", "|---|---|---:|---:|---|---|---:|"]
    for link, rec in records:
        imp = rec["imports"]
        refed, floor, met = imp["refed_bytes"], imp["floor_goal_s"], imp["floor_met"]
        word = lambda ok: "met" if ok else "missed"  # noqa: E731
        out.append(f"| [{rec['case']}]({link}): {rec['changed']} | "
                   f"`{rec['variant']}` {rec['arch']} | {refed['full']:,}, {refed['delta']:,} | "
                   f"{imp['disk_write_bytes_per_s'] / 1e6:,.0f} MB/s | {imp['full_import_s']:.1f} s ({floor['full']:.1f} s: "
                   f"{word(met['full'])}) | **{imp['delta_import_s']:.1f} s** ({floor['delta']:.1f} s: {word(met['delta'])}) | "
                   f"{imp['engine_load_delta_s']:.1f} s |")
    return "\n".join(out)

