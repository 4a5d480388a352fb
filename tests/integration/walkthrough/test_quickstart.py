"""docs/quickstart.md runs as written (tests/integration/walkthrough/conftest.py runs it: its shell
blocks, in order, in one shell, in a scratch copy of the checkout, on loopback only; bash -x names
a failing step), and says what it printed: the records it promises, and its figures (the gates,
the scan's findings, the signature objects promote copied) compared with the run's. This folder
sorts last among the integration tests: the walkthrough removes and re-imports the shared
cpu-debian12 image, and puts it back whatever happens."""

from __future__ import annotations

import json
import re

import pytest

from support.commands import ROOT

pytestmark = pytest.mark.docker

NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def page() -> str:
    return " ".join((ROOT / "docs" / "quickstart.md").read_text().split())


def table_row(output: str, first: str) -> list[str]:
    """A printed table's row (boxed in a terminal, tab-separated in a pipe) by its first cell."""
    for line in output.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃\t]", line) if c.strip()]
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no table row {first!r} in the output")


def test_the_quickstart_runs_as_written(quickstart):
    quickstart.require()
    build = quickstart.work / "build" / "cpu-debian12"
    pushed = json.loads((build / "push.json").read_text())
    assert set(pushed["arches"]) == {"amd64"} and not pushed["gates_skipped"]
    assert json.loads((build / "sign.json").read_text())["index"]["digest"] == pushed["index_digest"]
    promoted = json.loads((build / "promote.json").read_text())
    assert promoted["digest"] == pushed["index_digest"] and promoted["verified_with"].startswith("sha256:")
    built = json.loads((build / "build-amd64.json").read_text())
    assert quickstart.output.count('"passed": true') >= 2   # both verifies
    isos = list((quickstart.work / "build" / "disc").glob("*.iso"))
    assert len(isos) == 1 and isos[0].stat().st_size < 4_700_000_000, isos   # "one DVD-sized ISO"
    assert built["image_id"] in quickstart.output.split("export-verify", 1)[-1]   # verified by its id
    assert quickstart.imported_id == built["image_id"]   # import loaded it back under its name, same id
    chain = json.loads((build / "release.json").read_text())   # step 6: the one command after the steps
    assert chain["passed"] is True
    assert {s["name"]: s["verdict"] for s in chain["stages"]} == {
        **dict.fromkeys(("build", "gates", "scan", "push", "sign"), "skipped"),
        **dict.fromkeys(("smoke", "export", "export-verify", "report"), "pass")}
    assert "release cpu-debian12 (amd64): released" in quickstart.output   # the page's words: test_release_chain


def test_the_quickstart_says_what_the_run_printed(quickstart):
    quickstart.require()
    text, out = page(), quickstart.output
    gates = re.search(r"a table of (\w+) gates, all `PASS`", text)
    assert gates, "docs/quickstart.md no longer says how many gates pass"
    build = quickstart.work / "build" / "cpu-debian12"
    ran = json.loads((build / "gates-amd64.json").read_text())["gates"]
    assert len(ran) == NUMBERS[gates.group(1)] and all(g["passed"] for g in ran), ran

    low = re.search(r"\((\w+) LOW findings?, [^)]*\)", text)
    assert low, "docs/quickstart.md no longer says what the scan finds"
    row = re.search(r"\(LOW: (\d+) found, (\d+) failing\)", text)
    assert row, "docs/quickstart.md no longer shows the scan's LOW row"
    assert [str(NUMBERS[low.group(1)]), *row.groups()] == [row.group(1), *table_row(out, "LOW")[1:3]], (
        low.group(0), row.group(0), table_row(out, "LOW"))
    decision = json.loads((build / "scan-amd64" / "decision.json").read_text())
    found = sorted(v["id"] for v in decision["verdicts"] if v["severity"] == "LOW")
    named = sorted(set(re.findall(r"\b(CVE-\d{4}-\d+|DS\d{3})\b", low.group(0))))
    assert named == found, f"the page names {named} as the LOW findings; the scan found {found}"

    for quoted in ("built rapidship/dask:26.10-cpu-debian12-py3.11-amd64", "registry on https://127.0.0.1:",
                   "PASS rapidship/dask:", "pushed ", "signed "):   # what the page quotes, as printed
        assert quoted in text and quoted in out, quoted
    copied = re.search(r"that (\d+) signature objects were copied", text)
    assert copied and f"{copied.group(1)} signature/attestation objects copied" in out
