"""The runtime base in layers by Debian package: every rootfs entry lands in exactly one layer (the
directories, with their own headers, wherever a layer needs them and in the state layer), files
listed through merged /usr's links are found, hard-linked groups stay together, dpkg's state and
files no package lists lie last, and the budget holds."""

from __future__ import annotations

import io
import tarfile

from rapidship.imagebuild.base_layers import STATE, dpkg_lists, plan_base_layers, resolve


def _rootfs(files: dict[str, bytes], links: dict[str, str] = {}, hard: dict[str, str] = {}) -> tuple[tarfile.TarFile, list]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        folders = sorted({"/".join(p.split("/")[:i]) for p in [*files, *links, *hard] for i in range(1, p.count("/") + 1)})
        for d in ["usr", "usr/bin", "usr/lib", *folders]:
            info = tarfile.TarInfo("./" + d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, target in links.items():
            info = tarfile.TarInfo("./" + name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in hard.items():
            info = tarfile.TarInfo("./" + name)
            info.type, info.linkname = tarfile.LNKTYPE, "./" + target
            tar.addfile(info)
    buf.seek(0)
    tar = tarfile.open(fileobj=buf)
    return tar, tar.getmembers()


def _names(layer) -> set[str]:
    return {m.name.lstrip("./") for m in layer.members if not m.isdir()}


def test_merged_usr_paths_as_dpkg_lists_them_are_found_through_the_links():
    links = {"bin": "usr/bin", "lib64": "/usr/lib"}
    assert resolve("/bin/bash", links) == "usr/bin/bash"
    assert resolve("/lib64/ld.so", links) == "usr/lib/ld.so"
    assert resolve("/bin", links) == "bin"  # the link itself, as listed


def test_every_entry_lands_once_packages_apart_and_the_state_last():
    files = {"usr/bin/bash": b"b" * 300, "usr/bin/perl": b"p" * 500, "usr/lib/libz.so.1": b"z" * 90,
             "etc/passwd": b"root:x:0:0\n", "var/lib/dpkg/status": b"Package: zlib1g\n",
             "var/lib/dpkg/info/bash.list": b"/.\n/bin\n/bin/bash\n",
             "var/lib/dpkg/info/perl-base.list": b"/.\n/usr/bin/perl\n/usr/bin/perl5.36.0\n",
             "var/lib/dpkg/info/zlib1g:amd64.list": b"/.\n/lib/libz.so.1\n",
             "var/lib/dpkg/info/zlib1g:amd64.md5sums": b"x  lib/libz.so.1\n"}
    tar, members = _rootfs(files, links={"bin": "usr/bin", "lib": "usr/lib"}, hard={"usr/bin/perl5.36.0": "usr/bin/perl"})
    lists = dpkg_lists(tar, members)
    assert sorted(lists) == ["bash", "perl-base", "zlib1g"]
    layers = _alone(members, lists)
    by = {layer.name: layer for layer in layers}
    assert layers[-1].name == STATE
    assert _names(by["zlib1g"]) == {"usr/lib/libz.so.1", "var/lib/dpkg/info/zlib1g:amd64.list",
                                    "var/lib/dpkg/info/zlib1g:amd64.md5sums"}
    assert _names(by["perl-base"]) == {"usr/bin/perl", "usr/bin/perl5.36.0", "var/lib/dpkg/info/perl-base.list"}
    assert _names(by[STATE]) == {"etc/passwd", "var/lib/dpkg/status", "bin", "lib"}
    everything = [m.name for layer in layers for m in layer.members if not m.isdir()]
    assert sorted(everything) == sorted(m.name for m in members if not m.isdir())  # each file once
    assert {m.name for m in by[STATE].members if m.isdir()} == {m.name for m in members if m.isdir()}
    for layer in layers:  # a layer holds its files' folders, with the rootfs's own headers
        held = {m.name for m in layer.members}
        for m in layer.members:
            parent = m.name.rsplit("/", 1)[0]
            assert parent == "." or parent in held, (layer.name, m.name)


def _alone(members, lists):
    """Each package alone: the grouping limit at one byte."""
    import rapidship.imagebuild.base_layers as bl

    saved, bl.GROUP_BYTES = bl.GROUP_BYTES, 1
    try:
        return plan_base_layers(members, lists, budget=10)
    finally:
        bl.GROUP_BYTES = saved


def test_small_packages_share_a_layer_and_the_limit_doubles_to_fit_the_budget():
    files = {f"usr/lib/p{i}.so": b"x" * 1000 for i in range(8)}
    files |= {f"var/lib/dpkg/info/p{i}.list": f"/usr/lib/p{i}.so\n".encode() for i in range(8)}
    tar, members = _rootfs(files)
    lists = dpkg_lists(tar, members)
    assert len(plan_base_layers(members, lists)) == 2  # all eight within 4 MiB: one group, and the state
    import rapidship.imagebuild.base_layers as bl
    saved, bl.GROUP_BYTES = bl.GROUP_BYTES, 1
    try:
        assert len(plan_base_layers(members, lists, budget=100)) == 9  # alone each
        fitted = plan_base_layers(members, lists, budget=5)
        assert len(fitted) <= 5 and sorted(p for layer in fitted for p in layer.packages) == [f"p{i}" for i in range(8)]
    finally:
        bl.GROUP_BYTES = saved


def test_the_runtimes_apt_step_is_split_once_and_its_history_follows():
    import json

    from rapidship.imagebuild.normalise import SPLIT_MARK, normal_config, split_by_package, splits

    step = "RUN |1 TARGETARCH=amd64 /bin/bash -o pipefail -c apt-get update && apt-get install -y python3.11"
    assert splits(step) and not splits(step + SPLIT_MARK + "python3.11") and not splits("COPY x /opt/rapids/")
    config = {"history": [{"created_by": "base", "created": "x"}, {"created_by": "ENV A=1", "empty_layer": True},
                          {"created_by": step, "created": "y"}, {"created_by": "COPY x"}], "rootfs": {}}
    doc = json.loads(normal_config(config, ["a", "b1", "b2", "c"], 0, {1: ["python3.11", "dpkg-state"]}))
    assert [h["created_by"] for h in doc["history"]] == ["base", "ENV A=1", step + SPLIT_MARK + "python3.11",
                                                         step + SPLIT_MARK + "dpkg-state", "COPY x"]
    assert all(h.get("created") in (None, "1970-01-01T00:00:00Z") for h in doc["history"])
    again = json.loads(normal_config(doc, ["a", "b1", "b2", "c"], 0, {}))  # normalised again: unchanged
    assert again["history"] == doc["history"]

    files = {"usr/bin/python3.11": b"p" * 100, "usr/lib/python3.11/os.py": b"o" * 10,
             "usr/lib/python3.11/__pycache__/os.cpython-311.pyc": b"c" * 10, "var/lib/dpkg/status": b"s",
             "var/lib/dpkg/info/python3.11.list": b"/usr/bin/python3.11\n/usr/lib/python3.11/os.py\n"}
    tar, members = _rootfs(files)
    parts = split_by_package(tar, members)
    assert [name for name, _ in parts] == ["python3.11", "dpkg-state"]
    assert "./usr/lib/python3.11/__pycache__/os.cpython-311.pyc" in {m.name for m in parts[0][1]}  # with its source
    tar, members = _rootfs(files | {"usr/lib/python3.11/.wh..wh..opq": b""})  # a folder the step made
    parts = split_by_package(tar, members)
    assert "./usr/lib/python3.11/.wh..wh..opq" in {m.name for m in parts[0][1]}  # the lowest part hides what is below
    assert all(".wh." not in m.name for _, held in parts[1:] for m in held)
    tar, members = _rootfs({"usr/lib/libreadline.so.8": b"r" * 50, "var/lib/dpkg/info/libreadline8.list":
                            b"/lib/libreadline.so.8\n", "var/lib/dpkg/status": b"s"})
    parts = split_by_package(tar, members)  # merged /usr's links are the base's, not this layer's
    assert "./usr/lib/libreadline.so.8" in {m.name for m in parts[0][1]}
    tar, members = _rootfs({"etc/passwd": b"x"})
    assert split_by_package(tar, members) is None  # installed nothing
