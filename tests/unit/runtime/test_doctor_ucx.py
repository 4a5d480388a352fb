"""The doctor on worker commands that ask for UCX: each missing piece is one FATAL naming it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rapidship.runtime.command import classify, intent_for, ucx_wanted
from rapidship.runtime.gpu_view import GpuView
from rapidship.runtime.rules import derive, findings_for
from support.doctor_facts import facts

MiB, GiB = 1 << 20, 1 << 30
FIELD = ["dask", "cuda", "worker", "--rmm-async", "--rmm-pool-size", "28g", "--local-directory", "/spill",
         "--enable-tcp-over-ucx", "--enable-nvlink", "--scheduler", "tcp://scheduler:8786"]


def fatal(f, command):
    intent = intent_for(command, {}, gpu_count=1)
    return [x for x in findings_for(f, derive(f), intent) if x.level == "FATAL"]


def ucx_facts(**over):
    f = facts(**over)
    return replace(f, spill_config=replace(f.spill_config, ucx_available=over.get("ucx", True)))


@pytest.mark.parametrize("command, flag", [
    (FIELD, "--enable-tcp-over-ucx"),
    (["dask-cuda-worker", "--enable-nvlink", "tcp://s:8786"], "--enable-nvlink"),
    (["dask", "worker", "--protocol", "ucx", "ucx://s:8786"], "--protocol ucx"),
    (["dask", "worker", "ucxx://s:8786"], "ucxx://s:8786"),
    (["dask", "worker", "tcp://s:8786"], ""),
    (["python", "job.py", "--enable-tcp-over-ucx"], ""),  # not a worker: not read
])
def test_the_flag_that_asks_for_ucx_is_found(command, flag):
    program, args = classify(command)
    assert ucx_wanted(program, args)[0] == flag


def test_the_field_command_passes_with_ucx_and_a_big_shm():
    f = ucx_facts(shm_bytes=8 * GiB)
    assert [x.message for x in fatal(f, FIELD)] == []


def test_no_ucx_in_the_image_is_one_fatal():
    f = facts(shm_bytes=8 * GiB)  # SpillConfig default: ucx not importable
    found = fatal(f, FIELD)
    assert [x.topic for x in found] == ["ucx"]
    assert "--enable-tcp-over-ucx asks for UCX" in found[0].message and "ucxx" in found[0].message


def test_dockers_default_shm_is_fatal_for_ucx_and_only_a_warning_without():
    f = ucx_facts(shm_bytes=64 * MiB)
    found = fatal(f, FIELD)
    assert [x.topic for x in found] == ["shm"] and "--shm-size=8g" in found[0].message
    tcp = ["dask", "worker", "--memory-limit", "200MB", "tcp://s:8786"]
    assert not [x for x in fatal(f, tcp) if x.topic == "shm"]
    intent = intent_for(tcp, {}, gpu_count=0)
    assert any(x.topic == "shm" and x.level == "WARNING" for x in findings_for(f, derive(f), intent))


def test_rdma_needs_unlimited_memlock():
    f = ucx_facts(shm_bytes=8 * GiB, memlock_soft=8 * MiB, gpu=GpuView(True, "", gpus=[]))
    assert fatal(f, FIELD) == []  # TCP over UCX and NVLink pin no registered memory
    found = fatal(f, FIELD + ["--enable-infiniband"])
    assert [x.topic for x in found] == ["memlock"] and "--ulimit memlock=-1" in found[0].message
    assert fatal(replace(f, memlock_soft=None), FIELD + ["--enable-infiniband"]) == []
