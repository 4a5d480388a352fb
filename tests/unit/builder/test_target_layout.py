"""pip install --target (the cross-install's only mode) drops a wheel's scripts and data files at
the top of site-packages; builder/target_layout.py moves exactly those to the venv prefix. A real
wheel, installed by the real pip, then the program the image build runs."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

from rapidship.builder import target_layout

FILES = {
    "demo/__init__.py": b"VALUE = 1\n",
    "demo-1.0.data/scripts/demo-tool": b"#!python\nprint('hi')\n",
    "demo-1.0.data/data/share/demo/schema.json": b"{}\n",
    "demo-1.0.data/data/etc/demo/demo.conf": b"x = 1\n",
    "demo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
    "demo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}


def wheel(out: Path) -> Path:
    path = out / "demo-1.0-py3-none-any.whl"
    rows = []
    with zipfile.ZipFile(path, "w") as z:
        for name, data in FILES.items():
            z.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{name},sha256={digest},{len(data)}")
        z.writestr("demo-1.0.dist-info/RECORD", "\n".join([*rows, "demo-1.0.dist-info/RECORD,,"]) + "\n")
    return path


def installed(tmp_path: Path) -> tuple[Path, Path]:
    prefix = tmp_path / "venv"
    site = prefix / "lib" / "python3.11" / "site-packages"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
                    "--disable-pip-version-check", "--target", str(site), str(wheel(tmp_path))], check=True)
    return site, prefix


def test_scripts_and_data_files_move_to_the_prefix_and_records_follow(tmp_path):
    site, prefix = installed(tmp_path)
    assert (site / "share" / "demo" / "schema.json").exists() and (site / "bin" / "demo-tool").exists()  # pip's --target
    assert target_layout.main(["--site", str(site), "--prefix", str(prefix)]) == 0
    assert (prefix / "share" / "demo" / "schema.json").read_bytes() == b"{}\n"
    assert (prefix / "etc" / "demo" / "demo.conf").exists() and (prefix / "bin" / "demo-tool").exists()
    assert not (site / "share").exists() and not (site / "etc").exists() and not (site / "bin").exists()
    assert (site / "demo" / "__init__.py").exists()                  # the package stays where Python imports it
    record = (site / "demo-1.0.dist-info" / "RECORD").read_text()
    assert "../../../share/demo/schema.json," in record and "../../../bin/demo-tool," in record
    # every RECORD row names a file that is there, as importlib.metadata resolves them
    for row in record.splitlines():
        assert (site / row.split(",")[0]).exists(), row


def test_a_venv_install_s_own_rows_stay_and_a_missing_file_is_refused_before_anything_moves(tmp_path):
    site, prefix = installed(tmp_path)
    venv_pip = site / "pip-23.0.1.dist-info"      # what `python -m venv` installs: RECORD rows in the venv's form
    venv_pip.mkdir()
    (venv_pip / "RECORD").write_text("../../../bin/pip,,\npip/__init__.py,,\n")
    record = site / "demo-1.0.dist-info" / "RECORD"
    record.write_text(record.read_text() + "../../share/demo/gone.json,,\n")
    try:
        target_layout.main(["--site", str(site), "--prefix", str(prefix)])
    except SystemExit as err:
        assert "gone.json is missing" in str(err)
    else:
        raise AssertionError("a RECORD row naming no file was passed over")
    assert (site / "share" / "demo" / "schema.json").exists()   # nothing moved before the refusal
    record.write_text(record.read_text().replace("../../share/demo/gone.json,,\n", ""))
    assert target_layout.main(["--site", str(site), "--prefix", str(prefix)]) == 0
    assert (venv_pip / "RECORD").read_text() == "../../../bin/pip,,\npip/__init__.py,,\n"
