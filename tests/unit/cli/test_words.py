"""Counts in messages read as English: "1 arch", "2 arches", never "1 arches" or "member(s)"."""

from __future__ import annotations

from rapidship.console import counted


def test_counted_words_agree_with_their_number():
    assert [counted(n, "arch", "arches") for n in (0, 1, 2)] == ["0 arches", "1 arch", "2 arches"]
    assert [counted(n, "other member") for n in (1, 157)] == ["1 other member", "157 other members"]
    assert counted(1_918, "retry", "retries") == "1,918 retries"
