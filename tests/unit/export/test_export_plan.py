"""Pure core of the disc export: media sizes, how the stream is cut, the volume files' texts."""

from __future__ import annotations

import hashlib
import io
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


from rapidship.errors import ConfigError  # noqa: E402
from rapidship.export.write import ISO_RESERVE, MEDIA, METADATA_RESERVE, PART_MAX, ExportRecord, Layout, Media, PartWriter, install_script, parse_media, plan_layout, split_points, sums_text


def test_media_names_and_sizes():
    assert parse_media("dvd") == Media("dvd", 4_700_000_000)
    assert parse_media("DVD-DL").bytes == 8_500_000_000
    assert parse_media("bd25").bytes == 25_000_000_000
    assert parse_media("4700000000").bytes == 4_700_000_000
    assert parse_media("700MB").bytes == 700_000_000
    assert parse_media("4.7GB").bytes == 4_700_000_000
    assert parse_media(3_000_000).bytes == 3_000_000


@pytest.mark.parametrize("bad", ["floppy", "12 parsecs", "-5", ""])
def test_bad_media_names_the_flag(bad):
    with pytest.raises(ConfigError) as err:
        parse_media(bad)
    assert err.value.where == "--media" and "dvd" in err.value.fix


def test_media_too_small_for_the_file_system_is_refused():
    with pytest.raises(ConfigError, match="leaves no room"):
        plan_layout(Media("tiny", ISO_RESERVE + METADATA_RESERVE))


def test_dvd_layout_keeps_parts_below_4_gib_and_room_for_the_file_system():
    layout = plan_layout(parse_media("dvd"))
    assert layout.payload_bytes == MEDIA["dvd"] - ISO_RESERVE - METADATA_RESERVE
    assert PART_MAX < 4 * 1024**3
    points = split_points(10_000_000_000, layout)
    volumes = {v for v, _, _ in points}
    assert volumes == {1, 2, 3}
    first = [length for v, _, length in points if v == 1]
    assert first == [PART_MAX, layout.payload_bytes - PART_MAX]  # a full DVD carries two parts


@settings(max_examples=300, deadline=None)
@given(total=st.integers(0, 50_000), payload=st.integers(1, 5_000), part_max=st.integers(1, 6_000))
def test_split_points_cover_the_stream_once_and_respect_every_limit(total, payload, part_max):
    layout = Layout(Media("x", payload), payload, part_max)
    points = split_points(total, layout)
    offset = 0
    for volume, start, length in points:
        assert start == offset and 0 < length <= part_max
        assert (volume - 1) * payload <= start and start + length <= volume * payload  # inside its volume
        offset += length
    assert offset == total
    assert [v for v, _, _ in points] == sorted(v for v, _, _ in points)


@settings(max_examples=40, deadline=None)
@given(data=st.binary(min_size=1, max_size=6_000), chunks=st.lists(st.integers(1, 900), min_size=1, max_size=40),
       payload=st.integers(200, 2_500), part_max=st.integers(100, 3_000))
def test_part_writer_cuts_where_split_points_say_and_loses_nothing(tmp_path_factory, data, chunks, payload, part_max):
    out = tmp_path_factory.mktemp("parts")
    layout = Layout(Media("x", payload), payload, part_max)
    writer = PartWriter(layout, out)
    stream = io.BytesIO(data)
    i = 0
    while block := stream.read(chunks[i % len(chunks)]):
        writer.write(memoryview(block))
        i += 1
    writer.close()
    assert [(p.volume, p.offset, p.bytes) for p in writer.parts] == split_points(len(data), layout)
    joined = b"".join((out / f"volume-{p.volume:02d}" / p.name).read_bytes() for p in writer.parts)
    assert joined == data
    assert writer.whole.hexdigest() == hashlib.sha256(data).hexdigest()
    for p in writer.parts:
        assert hashlib.sha256((out / f"volume-{p.volume:02d}" / p.name).read_bytes()).hexdigest() == p.sha256


def test_sums_text_is_what_sha256sum_checks(tmp_path):
    files = {"b.bin": b"second", "a.txt": b"first\n", "images.tar.zst.000": b"\x00" * 10}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    text = sums_text({n: hashlib.sha256(d).hexdigest() for n, d in files.items()})
    (tmp_path / "SHA256SUMS").write_text(text)
    ok = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert text == subprocess.run(["sha256sum", *sorted(files)], cwd=tmp_path, capture_output=True, text=True).stdout
    (tmp_path / "b.bin").write_bytes(b"sekond")
    bad = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode != 0 and "b.bin: FAILED" in bad.stdout


def test_install_script_is_posix_sh_with_this_exports_data():
    from rapidship.export.write import INSTALL_BODY, ImageRecord, PartRecord

    record = ExportRecord(export_id="ab" * 16, created="now", tool_version="0", media=Media("dvd", 1),
                          images=[ImageRecord("r/x:1", [], "sha256:" + "0" * 64, [], "amd64", "linux", 1, [])],
                          parts=[PartRecord("images.tar.zst.000", 0, 1, 0, 5, "0" * 64),
                                 PartRecord("images.tar.zst.001", 1, 2, 5, 3, "1" * 64)])
    script = install_script(record, INSTALL_BODY.read_text())
    assert f"EXPORT_ID='{'ab' * 16}'" in script and "VOLUME_COUNT=2" in script
    assert "images.tar.zst.001 2 3" in script and "r/x:1 sha256:" in script
    assert "@EXPORT_DATA@" not in script
    assert "EXTENDS=''" in script and "EXTENDS_LAYERS=''" in script  # a full disc extends nothing
    record.extends = {"export_id": "cd" * 16, "created": "2026-12-01T00:00:00+00:00", "layers": ["sha256:" + "2" * 64],
                      "images": [{"ref": "r/x:0", "image_id": "sha256:" + "3" * 64, "arch": "amd64", "variant": ""}]}
    delta = install_script(record, INSTALL_BODY.read_text())
    assert f"EXTENDS='{'cd' * 16} of 2026-12-01T00:00:00+00:00'" in delta and "EXTENDS_NAMES='r/x:0'" in delta
    assert f"EXTENDS_LAYERS='sha256:{'2' * 64}'" in delta
    for shell in ("sh", "bash", "dash"):
        if subprocess.run(["which", shell], capture_output=True).returncode == 0:
            parsed = subprocess.run([shell, "-n"], input=script, capture_output=True, text=True)
            assert parsed.returncode == 0, f"{shell}: {parsed.stderr}"


# ---- the volume checker on exports made from random bytes (no engine needed) --------------------

def _fake_export(out: Path, size: int, media: int):
    import os
    import uuid

    from rapidship.export.write import ImageRecord, volume_dir, write_volume_files

    layout = plan_layout(parse_media(media))
    writer = PartWriter(layout, out)
    writer.write(memoryview(os.urandom(size)))
    writer.close()
    record = ExportRecord(export_id=uuid.uuid4().hex, created="2026-01-01T00:00:00+00:00", tool_version="0",
                          media=layout.media, images=[ImageRecord("x/y:1", [], "sha256:" + "a" * 64, [], "amd64", "linux", size, [])],
                          parts=writer.parts, archive_bytes=writer.total, archive_sha256=writer.whole.hexdigest())
    write_volume_files(record, out)
    return record, [volume_dir(out, v) for v in range(1, record.volume_count + 1)]


SMALL = ISO_RESERVE + METADATA_RESERVE + 100_000


def test_checker_accepts_a_whole_export_in_any_order(tmp_path):
    from rapidship.export.verify import verify

    record, dirs = _fake_export(tmp_path, 250_000, SMALL)
    assert record.volume_count == 3
    checked = verify([str(d) for d in reversed(dirs)])
    assert checked.export_id == record.export_id
    assert [p["index"] for p, _ in checked.parts] == list(range(len(record.parts)))
    assert b"".join(s.path.read_bytes() for _, s in checked.parts) == b"".join(
        (d / p.name).read_bytes() for p in record.parts for d in dirs if (d / p.name).exists())


def test_checker_names_a_volume_given_twice_and_the_one_missing(tmp_path):
    from rapidship.errors import GateFailure
    from rapidship.export.verify import verify

    _, dirs = _fake_export(tmp_path, 250_000, SMALL)
    with pytest.raises(GateFailure) as err:
        verify([str(dirs[0]), str(dirs[0]), str(dirs[2])])
    assert f"volume 1 given twice: {dirs[0]} and {dirs[0]}" in err.value.message
    assert "volume 2 of 3 is missing" in err.value.message and "nothing was loaded" in err.value.message


def test_checker_names_a_manifest_edited_to_claim_another_volume(tmp_path):
    """Even a hand-edited volume number is caught: MANIFEST.json no longer matches SHA256SUMS."""
    from rapidship.errors import GateFailure
    from rapidship.export.verify import verify

    _, dirs = _fake_export(tmp_path, 250_000, SMALL)
    manifest = dirs[2] / "MANIFEST.json"
    manifest.write_text(manifest.read_text().replace('"volume": 3,', '"volume": 2,'))
    with pytest.raises(GateFailure) as err:
        verify([str(d) for d in dirs])
    assert f"volume 2 of 3 ({dirs[2]}): MANIFEST.json does not match SHA256SUMS" in err.value.message
    assert "given twice" not in err.value.message


def test_a_directory_that_is_no_volume_is_the_operators_input_not_damage(tmp_path):
    from rapidship.errors import ConfigError, GateFailure
    from rapidship.export.verify import verify

    (tmp_path / "stray").mkdir()
    (tmp_path / "stray" / "notes.txt").write_text("hello")
    with pytest.raises(ConfigError, match="is not a disc: it holds no MANIFEST.json"):
        verify([str(tmp_path / "stray")])
    (tmp_path / "stray" / "SHA256SUMS").write_text("")   # a volume that lost its MANIFEST.json: damage
    with pytest.raises(GateFailure, match="no MANIFEST.json: not a volume of a rapidship export"):
        verify([str(tmp_path / "stray")])


def test_an_export_directory_stands_for_its_isos(tmp_path):
    from rapidship.export.verify import expand_sources

    (tmp_path / "rapidship-abcd1234-02of02.iso").write_bytes(b"")
    (tmp_path / "rapidship-abcd1234-01of02.iso").write_bytes(b"")
    volume = tmp_path / "volume-01"
    volume.mkdir()
    (volume / "MANIFEST.json").write_text("{}")
    assert expand_sources([str(tmp_path)]) == [str(tmp_path / "rapidship-abcd1234-01of02.iso"),
                                               str(tmp_path / "rapidship-abcd1234-02of02.iso")]
    assert expand_sources([str(volume), "/dev/sr0"]) == [str(volume), "/dev/sr0"]  # a volume stays a volume


@pytest.mark.parametrize("media", ["0", "1000", "1KB"])
def test_a_medium_too_small_is_the_bad_flag_named_first(media):
    from rapidship.export.write import parse_media

    with pytest.raises(ConfigError, match="leaves no room for data") as err:
        parse_media(media)
    assert err.value.where == "--media"


def test_a_source_that_is_neither_volume_nor_iso_nor_drive_is_named():
    from rapidship.export.verify import open_volume

    with pytest.raises(ConfigError, match="/dev/null is not a volume directory, an ISO file or a disc drive"):
        open_volume("/dev/null")
    with pytest.raises(ConfigError, match="does not exist"):
        open_volume("/nonexistent/volume-01")
