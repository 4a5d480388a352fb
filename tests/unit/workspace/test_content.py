"""The env's content manifest: what is listed, its digest rule, and the diff that names files."""

from __future__ import annotations

import hashlib

from rapidship.image import FileEntry, ImageSnapshot
from rapidship import content


def snap(files: dict[str, bytes], links: dict[str, str] | None = None, mode: int = 0o644) -> ImageSnapshot:
    entries = [FileEntry("final", p, mode, len(d), True) for p, d in files.items()]
    entries.append(FileEntry("final", "/etc/hostname", 0o644, 3, True))  # outside the env: not listed
    return ImageSnapshot("ref", {}, [], entries, {}, {p: hashlib.sha256(d).hexdigest() for p, d in files.items()},
                         links or {})


def test_manifest_lists_env_files_and_links_and_its_digest_is_the_documented_lines():
    image = snap({"/opt/rapids/bin/python": b"elf", "/opt/rapidship/prune.json": b"{}"},
                 {"/opt/rapids/bin/python3": "python"})
    record = content.manifest(image, "v", "amd64", "sha256:id")
    assert [e.path for e in record.entries] == ["/opt/rapids/bin/python", "/opt/rapids/bin/python3",
                                                "/opt/rapidship/prune.json"]
    lines = ("/opt/rapids/bin/python\t0644\t3\t" + hashlib.sha256(b"elf").hexdigest() + "\n"
             "/opt/rapids/bin/python3\tlink\tpython\n"
             "/opt/rapidship/prune.json\t0644\t2\t" + hashlib.sha256(b"{}").hexdigest() + "\n")
    assert record.digest == "sha256:" + hashlib.sha256(lines.encode()).hexdigest()
    assert (record.files, record.bytes) == (3, 5)


def test_equal_content_gives_equal_digests_and_a_difference_is_named():
    a = content.manifest(snap({"/opt/rapids/a.py": b"1", "/opt/rapids/b.pyc": b"x"}), "v", "amd64", "sha256:1")
    b = content.manifest(snap({"/opt/rapids/a.py": b"1", "/opt/rapids/b.pyc": b"x"}), "v", "amd64", "sha256:2")
    assert a.digest == b.digest and content.compare(a, b) == []
    c = content.manifest(snap({"/opt/rapids/a.py": b"1", "/opt/rapids/b.pyc": b"y", "/opt/rapids/new": b""}),
                         "v", "amd64", "sha256:3")
    assert c.digest != a.digest
    assert content.compare(a, c) == ["/opt/rapids/b.pyc: sha256 differ", "/opt/rapids/new: only in the second"]
    d = content.manifest(snap({"/opt/rapids/a.py": b"1", "/opt/rapids/b.pyc": b"x"}, mode=0o755), "v", "amd64", "")
    assert content.compare(a, d) == ["/opt/rapids/a.py: mode differ", "/opt/rapids/b.pyc: mode differ"]
