"""Builder side: put what `pip install --target SITE` left beside the packages where a venv has it.

The cross-install (pip --platform, for the target arch, run by the build machine's interpreter)
can only install with --target, and --target drops a wheel's scripts, headers and data files
(`<name>.data/scripts|headers|data/...`) at SITE's top: `SITE/bin/dask`, `SITE/share/jupyter/...`,
`SITE/etc/...`. Each RECORD names them relative to the lib dir pip installed into, as `../../X`.
This moves exactly those files to PREFIX/X, where an installed venv keeps them (scripts on PATH,
data under PREFIX/share), and rewrites their RECORD rows to the venv's form (`../../../X`), so
importlib.metadata finds them and nothing else under SITE moves. Standard library only.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from pathlib import Path

PIP_TARGET_UP = "../../"      # pip --target: RECORD paths relative to <tmp>/lib/python
VENV_UP = "../../../"         # a venv: relative to PREFIX/lib/pythonX.Y/site-packages


def from_target(path: str) -> bool:
    """A RECORD path pip --target put at SITE's top (`../../bin/x`); a venv install's own rows
    (`../../../bin/pip`, the venv's pip) are already where they belong."""
    return path.startswith(PIP_TARGET_UP) and not path.startswith(PIP_TARGET_UP + "../")


def outside_rows(record: str) -> list[str]:
    """The RECORD rows' paths that pip --target put at SITE's top (scripts, headers, data)."""
    return [row[0] for row in csv.reader(io.StringIO(record)) if row and from_target(row[0])]


def relocate(site: Path, prefix: Path) -> list[str]:
    """Move every file a RECORD places at SITE's top to PREFIX; rewrite those rows. Returns the moved paths."""
    moved: list[str] = []
    for record_path in sorted(site.glob("*.dist-info/RECORD")):
        text = record_path.read_text()
        rows = outside_rows(text)
        if not rows:
            continue
        for path in rows:   # every row checked before anything moves
            rel = path[len(PIP_TARGET_UP):]
            if not (site / rel).exists() and not (site / rel).is_symlink():
                raise SystemExit(f"target_layout: {record_path} lists {path}, but {site / rel} is missing")
        for path in rows:
            rel = path[len(PIP_TARGET_UP):]
            src, dst = site / rel, prefix / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
            moved.append(rel)
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        for row in csv.reader(io.StringIO(text)):
            if row and from_target(row[0]):
                row = [VENV_UP + row[0][len(PIP_TARGET_UP):], *row[1:]]
            writer.writerow(row)
        record_path.write_text(out.getvalue())
    _remove_empty_dirs(site, {Path(rel).parts[0] for rel in moved})
    return moved


def _remove_empty_dirs(site: Path, tops: set[str]) -> None:
    for top in tops:
        for root, _dirs, _files in sorted(os.walk(site / top), key=lambda w: -len(w[0])):
            if not os.listdir(root):
                os.rmdir(root)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", required=True, type=Path, help="the --target directory pip installed into")
    ap.add_argument("--prefix", required=True, type=Path, help="the venv whose bin/, share/, ... receive them")
    args = ap.parse_args(argv)
    moved = relocate(args.site, args.prefix)
    tops = sorted({Path(rel).parts[0] for rel in moved})
    print(f"target_layout: {len(moved)} file(s) moved to {args.prefix} ({', '.join(tops) or 'none'})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
