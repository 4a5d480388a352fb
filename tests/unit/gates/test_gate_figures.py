"""A passing gate's row says what it measured (the record's figure), not `-`."""

from __future__ import annotations

from rapidship.gates import figure, verdict


def test_each_passing_gate_shows_its_records_figure():
    rows = {r.gate: figure(r) for r in [
        verdict("size", [], size_bytes=253_253_263, zstd_bytes=82_352_755, budget_bytes=4_700_000_000,
                headroom_bytes=4_446_746_737),
        verdict("labels", [], labels={"org.opencontainers.image.revision": "ab", "io.rapidship.variant": "x"}),
        verdict("user", [], configured="1001:0", random_uid=1369383955),
        verdict("suid", [], count=0, capabilities=0, writable_path_dirs=0, user_writable=0),
        verdict("secrets", [], needles=4, needle_names=["a", "b"], layers_read="from their facts"),
    ]}
    assert rows == {"size": "253.3 MB of the 4,700.0 MB budget (82.4 MB zstd)",
                    "labels": "2 labels present",
                    "user": "runs as 1001:0, and as random uid 1369383955",
                    "suid": "0 setuid/setgid files, 0 file capabilities, 0 writable PATH dirs",
                    "secrets": "4 needles searched for (layers read from their facts), none found"}


def test_a_failing_gate_shows_its_reasons_and_an_unknown_gate_its_details():
    assert figure(verdict("size", ["over budget by 1 byte"], size_bytes=2)) == "over budget by 1 byte"
    assert figure(verdict("newgate", [], files=3)) == "files 3"
    assert figure(verdict("newgate", [])) == "passed"
