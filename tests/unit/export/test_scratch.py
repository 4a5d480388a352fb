"""Work folders: a run's own is kept while it lives, one a killed run left is removed and named."""

from __future__ import annotations

from rapidship.export.scratch import OWNER, remove_leftovers, work_folder


def test_only_folders_no_live_run_owns_are_removed(tmp_path):
    said: list[str] = []
    left = tmp_path / "rapidship-install.abc123"  # a killed run's: .owner there, nobody holds its lock
    left.mkdir()
    (left / OWNER).touch()
    (left / "blob").write_bytes(b"x" * 300_000)
    young = tmp_path / "rapidship-import-young"    # just being made: no .owner yet
    young.mkdir()
    other = tmp_path / "someone-else"
    other.mkdir()
    (other / OWNER).touch()
    with work_folder("rapidship-import-", tmp_path) as live:
        assert remove_leftovers(tmp_path, said.append) == [left]
        assert live.is_dir() and young.is_dir() and other.is_dir() and not left.exists()
    assert not live.exists()  # its own run removes it on exit
    assert said == [f"removed {left} (0.3 MB): the work folder of an earlier import that did not end (killed)"]
    assert remove_leftovers(tmp_path, said.append) == []
