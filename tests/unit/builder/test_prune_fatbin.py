"""The pruner's pure rules: which device code runs on which GPU, what is kept, what does not parse."""

from __future__ import annotations

import pytest

from support.fatbin_samples import KIND_CUBIN, KIND_PTX, SPECIFIC, container, entry, fleet_container
from rapidship.builder.prune import fatbin as F


def parsed(*blobs: bytes) -> list[F.Container]:
    data = b"".join(blobs)
    return F.parse_section(data, 0, len(data))[0]


def labels(entries) -> list[str]:
    return [e.label for e in entries]


@pytest.mark.parametrize("arch,flags,kind,gpu,runs", [
    (80, 0, KIND_CUBIN, 80, True), (80, 0, KIND_CUBIN, 86, True), (86, 0, KIND_CUBIN, 89, True),
    (86, 0, KIND_CUBIN, 80, False), (80, 0, KIND_CUBIN, 90, False), (90, 0, KIND_CUBIN, 100, False),
    (90, SPECIFIC, KIND_CUBIN, 90, True), (90, SPECIFIC, KIND_CUBIN, 91, False),
    (100, 0, KIND_CUBIN, 103, True), (120, 0, KIND_PTX, 90, False), (80, 0, KIND_PTX, 90, True),
    (90, 0, KIND_PTX, 120, True),
])
def test_cuda_compatibility_rules(arch, flags, kind, gpu, runs):
    (c,) = parsed(container(entry(kind, arch, 64, flags=0x2011 | flags)))
    assert F.runs_on(c.entries[0], gpu) is runs


def test_the_driver_choice_is_the_closest_cubin_then_the_newest_ptx():
    (c,) = parsed(fleet_container(archs=(70, 80, 86, 90), size=64, ptx=80))
    assert labels(F.chosen_for(c, 89)) == ["sm_86"]   # RTX 4090 / L40S run the sm_86 cubin
    assert labels(F.chosen_for(c, 80)) == ["sm_80"]
    assert labels(F.chosen_for(c, 100)) == ["ptx_80"]  # no Blackwell cubin: PTX JIT
    assert labels(F.chosen_for(c, 61)) == []


def test_arch_specific_cubins_serve_only_their_own_gpu():
    (c,) = parsed(container(entry(KIND_CUBIN, 80, 64), entry(KIND_CUBIN, 90, 64, flags=0x2011 | SPECIFIC)))
    assert labels(F.chosen_for(c, 90)) == ["sm_90a"]
    assert labels(F.select(c, (80, 90))) == ["sm_80", "sm_90a"]


def test_select_keeps_only_what_the_fleet_runs_in_original_order():
    (c,) = parsed(fleet_container(size=64))
    assert labels(F.select(c, (80, 90))) == ["sm_80", "sm_90"]
    assert labels(F.select(c, (89,))) == ["sm_86"]
    assert labels(F.select(c, (103,))) == ["sm_100"]


def test_a_container_nothing_in_the_fleet_runs_is_emptied_to_its_header():
    (c,) = parsed(container(entry(KIND_CUBIN, 100, 900), entry(KIND_CUBIN, 120, 300)))
    assert F.select(c, (80, 90)) == ()
    blob = F.write_container(container(entry(KIND_CUBIN, 100, 900)), 0, c, ())
    assert len(blob) == 16 and F.parse_section(blob, 0, len(blob))[0][0].entries == ()


def test_zero_padding_between_containers_is_accepted_and_counted():
    data = fleet_container(size=64) + b"\0" * 8 + fleet_container(size=64, seed=1)
    containers, padding = F.parse_section(data, 0, len(data))
    assert len(containers) == 2 and padding == 8


@pytest.mark.parametrize("blob,message", [
    (fleet_container(size=64) + b"\x01" * 8, "no fatbin container"),
    (container(entry(KIND_CUBIN, 80, 64))[:-8], "runs past"),
    (container(entry(3, 80, 64)), "unknown kind 3"),
    (container(entry(KIND_CUBIN, 80, 64))[:40] + b"\0" * 8, "runs past"),
])
def test_what_does_not_parse_is_refused(blob, message):
    with pytest.raises(F.FatbinError, match=message):
        F.parse_section(blob, 0, len(blob))


def test_write_container_keeps_entries_byte_for_byte_and_fixes_the_size():
    blob = fleet_container(size=100)
    (c,) = parsed(blob)
    kept = F.select(c, (90,))
    new = F.write_container(blob, 0, c, kept)
    (again,) = parsed(new)
    assert labels(again.entries) == ["sm_90"]
    e_old, e_new = kept[0], again.entries[0]
    assert new[e_new.offset:e_new.offset + e_new.size] == blob[e_old.offset:e_old.offset + e_old.size]


@pytest.mark.parametrize("text,expected", [("80,90", (80, 90)), ("90, 80", (80, 90)), ("sm_86", (86,))])
def test_keep_lists(text, expected):
    assert F.parse_keep(text) == expected


@pytest.mark.parametrize("text,message", [("", "no architectures"), ("81", "not a CUDA compute capability"),
                                          ("80,80", "twice"), ("eighty", "not a CUDA compute capability")])
def test_bad_keep_lists(text, message):
    with pytest.raises(ValueError, match=message):
        F.parse_keep(text)


def test_arch_bytes_sum_every_entry_by_label():
    (c,) = parsed(fleet_container(archs=(80, 90), size=64, ptx=120))
    assert F.arch_bytes([c]) == {"sm_80": 128, "sm_90": 128, "ptx_120": 96}
