"""The whole image's order (imagebuild/layer_order.py): rates from changelogs, which layers may trade
places, the order and the file system it makes."""

import gzip
import io
import json
import tarfile

import pytest

from rapidship.imagebuild import layer_order as lo
from rapidship.imagebuild.normalise import normal_config
from rapidship.render.layer_plan import best_order, yearly_refeed

ENTRY = """{src} ({version}) {dist}; urgency=medium

  * A fix.

 -- Maintainer <m@example.org>  {day}

"""


def changelog(*uploads: tuple[str, str, str]) -> str:
    return "".join(ENTRY.format(src="glibc", version=v, dist=d, day=day) for v, d, day in uploads)


GLIBC = [("2.36-9+deb12u9", "bookworm", "Sat, 11 Jan 2025 10:00:00 +0000"),       # after the first year
         ("2.36-9+deb12u4", "bookworm-security", "Tue, 30 Jan 2024 10:00:00 +0000"),
         ("2.36-9+deb12u3", "bookworm-security", "Sun, 01 Oct 2023 10:00:00 +0000"),
         ("2.36-9+deb12u1", "bookworm", "Sat, 29 Jul 2023 10:00:00 +0000"),
         ("2.37-1", "unstable", "Fri, 04 Aug 2023 10:00:00 +0000"),              # not the release's suite
         ("2.36-9", "unstable", "Tue, 25 Apr 2023 10:00:00 +0000")]              # before the release


def test_a_debian_layers_rate_is_its_uploads_to_the_release_in_the_releases_first_year():
    assert lo.debian_uploads(changelog(*GLIBC), "bookworm") == {
        ("glibc", "2.36-9+deb12u4"), ("glibc", "2.36-9+deb12u3"), ("glibc", "2.36-9+deb12u1")}
    # the next security fix adds an entry after the window: the rate, and so the layer's place, stay
    assert lo.debian_uploads(changelog(("2.36-9+deb12u10", "bookworm-security", "Mon, 01 Jun 2026 10:00:00 +0000"),
                                       *GLIBC), "bookworm") == lo.debian_uploads(changelog(*GLIBC), "bookworm")
    assert lo.codename_of('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_CODENAME=bookworm\n') == "bookworm"
    assert lo.changelog_text(gzip.compress(b"x (1) bookworm;")) == "x (1) bookworm;"


def member(name: str, kind: bytes = tarfile.REGTYPE, size: int = 1, mode: int = 0o644, mtime: int = 0,
           link: str = "") -> tarfile.TarInfo:
    m = tarfile.TarInfo(name)
    m.type, m.size, m.mode, m.mtime, m.linkname = kind, size if kind == tarfile.REGTYPE else 0, mode, mtime, link
    return m


def d(name: str, mtime: int = 0) -> tarfile.TarInfo:
    return member(name, tarfile.DIRTYPE, mode=0o755, mtime=mtime)


def unit(label: str, *members: tarfile.TarInfo, size: int = 100) -> lo.Unit:
    return lo.unit_of(label, size, list(members))


def test_layers_trade_places_only_where_every_file_stays_as_it_was():
    base = unit("libc6", d("usr"), d("usr/lib"), member("usr/lib/libc.so.6"), d("opt"))
    env = unit("env", d("opt"), d("opt/rapids"), member("opt/rapids/x.py"))
    other_dir = unit("env2", d("opt", mtime=5), member("opt/y"))            # /opt with another header
    same_file = unit("fix", d("usr"), d("usr/lib"), member("usr/lib/libc.so.6", size=2))
    whiteout = unit("rm", d("opt"), d("opt/rapids"), member("opt/rapids/.wh.x.py"))
    opaque = unit("opq", d("opt"), d("opt/rapids"), member("opt/rapids/.wh..wh..opq"), member("opt/rapids/z"))
    link = unit("link", d("usr"), d("usr/bin"), member("usr/bin/ld", tarfile.LNKTYPE, link="usr/lib/libc.so.6"))
    assert lo.conflicts([base, env]) == set()                      # disjoint files, the same /opt
    assert lo.conflicts([base, other_dir]) == {(0, 1)}
    assert lo.conflicts([base, same_file]) == {(0, 1)}
    assert lo.conflicts([env, whiteout]) == {(0, 1)} and lo.conflicts([base, whiteout]) == set()
    assert lo.conflicts([env, opaque]) == {(0, 1)}
    assert lo.conflicts([base, link]) == {(0, 1)}
    # a whiteout at the root keeps its name's leading dot ("./.wh.x": x, not "wh.x")
    top = unit("rm-top", member("./.wh.opt"))
    assert top.whiteouts == ("opt",) and lo.conflicts([env, top]) == {(0, 1)}
    # the file system a chain makes: the same for an allowed swap, another for a forbidden one
    units = [base, env, whiteout]
    assert lo.merged(units, [1, 0]) == lo.merged(units, [0, 1])
    assert "opt/rapids/x.py" not in lo.merged(units, [0, 1, 2]) and "opt/rapids/x.py" in lo.merged(units, [0, 2, 1])
    assert lo.merged([base, same_file], [1, 0]) != lo.merged([base, same_file], [0, 1])


def rate(per_year: float, weight: int) -> lo.Rate:
    return lo.Rate(per_year, weight, "test", "debian")


def test_the_order_puts_fewest_updates_per_byte_lowest_within_what_must_stay_below():
    # glibc 3 a year on 12 MB, the env's cupy 4 on 500 MB, a 1 MB package 1 a year, state every one
    rates = [rate(3, 12_000_000), rate(1, 1_000_000), rate(4, 500_000_000), rate(4, 50_000)]
    assert lo.order(rates, set()) == [2, 0, 1, 3]
    assert lo.order(rates, {(0, 2)}) == [0, 2, 1, 3]  # cupy must stay above glibc
    # an ordered chain orders to itself; the greedy order is the best one where nothing binds
    chain = lo.order(rates, set())
    assert lo.order([rates[i] for i in chain], set()) == [0, 1, 2, 3]
    costs = [(r.per_year, r.weight) for r in rates]
    assert yearly_refeed([costs[i] for i in chain]) == yearly_refeed(best_order(costs))
    # never updated: lowest whatever its size
    assert lo.order([rate(1, 10), rate(0, 1)], set()) == [1, 0]


def test_each_layers_rate_says_where_it_is_from():
    plan = {"layers": [{"name": "compiled/numpy", "releases_per_year": 5, "order_weight": 56_000_000},
                       {"name": "venv", "releases_per_year": 0}]}
    seen = [lo.Seen("libc6", 12_000_000, True, ("libc6",), (changelog(*GLIBC),)),
            lo.Seen("dpkg-state", 10_000, True, (), (), status=True),
            lo.Seen("tzdata", 3_000_000, False, ("tzdata",)),                          # no changelog kept
            lo.Seen("compiled/numpy", 60_000_000),
            lo.Seen("COPY --from=env-records /out/records/ /opt/rapidship/", 9_000, records=True),
            lo.Seen("COPY runtime/bin/ /usr/local/bin/", 20_000)]
    got = lo.rates(seen, "bookworm", plan)
    assert [(r.per_year, r.family) for r in got] == [(3, "debian"), (3, "dpkg-state"), (lo.NO_CHANGELOG_RATE, "debian"),
                                                     (5, "env"), (5, "env-records"),
                                                     (lo.PROJECT_RELEASES_PER_YEAR, "project")]
    assert got[3].weight == 60_000_000 and got[0].weight == 12_000_000   # the tar's bytes, what is written again
    assert "3 upload(s) to bookworm from 2023-06-10" in got[0].source
    # a release with no date known: every Debian layer gets the stated default, never a silent 0
    assert lo.rates(seen[:1], "forky", plan)[0].per_year == lo.NO_CHANGELOG_RATE
    assert lo.read_comment({"comment": lo.comment(got[0])}) == got[0].to_json()
    assert lo.read_comment({"comment": "buildkit.dockerfile.v0"}) is None


def test_the_history_moves_with_its_layers_and_records_each_ones_rate():
    config = {"history": [{"created_by": "base"}, {"created_by": "ENV A=1", "empty_layer": True},
                          {"created_by": "apt"}, {"created_by": "COPY env"}],
              "rootfs": {"type": "layers", "diff_ids": []}}
    doc = json.loads(normal_config(config, ["c", "a", "b"], 0, None, [2, 0, 1], ["n0", "n1", "n2"]))
    assert [(h["created_by"], h.get("comment")) for h in doc["history"]] == [
        ("COPY env", "n2"), ("base", "n0"), ("ENV A=1", None), ("apt", "n1")]
    assert doc["rootfs"]["diff_ids"] == ["c", "a", "b"]


def test_the_normaliser_refuses_an_order_that_would_change_the_images_files(monkeypatch):
    from types import SimpleNamespace

    from rapidship.errors import RapidshipError
    from rapidship.imagebuild import normalise

    old = unit("libc6", d("usr"), member("usr/libc.so"), size=10_000_000)
    new = unit("fix", d("usr"), member("usr/libc.so", size=2), size=10)   # the same file, built above
    parts = [SimpleNamespace(unit=old, seen=lo.Seen("libc6", 10_000_000, packages=("libc6",))),
             SimpleNamespace(unit=new, seen=lo.Seen("COPY fix /usr/", 10))]
    # the project step is updated more often per byte: it stays on top, as it must
    assert normalise.order_parts(parts, "bookworm", None)[0] == [0, 1]
    # an order that ignored the shared file would put the big package above it: refused, not written
    monkeypatch.setattr(lo, "conflicts", lambda units: set())
    monkeypatch.setattr(lo, "PROJECT_RELEASES_PER_YEAR", 0)
    with pytest.raises(RapidshipError, match="would change the image's files"):
        normalise.order_parts(parts, "bookworm", None)
