"""scripts/venv_ament_underlay.sh: the underlay that puts the PyPI wheels' venv on AMENT_PREFIX_PATH (make setup)."""
from __future__ import annotations

import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "venv_ament_underlay.sh"


def test_the_underlay_is_idempotent_and_appends_the_venv_once(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    underlay = tmp_path / "underlay"
    subprocess.run(["bash", str(SCRIPT), str(underlay), str(venv)], check=True)
    first = {p.name: p.read_text() for p in underlay.iterdir()}
    subprocess.run(["bash", str(SCRIPT), str(underlay), str(venv)], check=True)
    assert {p.name: p.read_text() for p in underlay.iterdir()} == first
    assert set(first) == {"local_setup.sh", "local_setup.bash", "local_setup.zsh"}
    for start, expected in [("", str(venv)), ("/opt/ws/install", f"/opt/ws/install:{venv}")]:
        out = subprocess.run(["bash", "-c", f'export AMENT_PREFIX_PATH="{start}"; source {underlay}/local_setup.bash; '
                              f'source {underlay}/local_setup.sh; echo "$AMENT_PREFIX_PATH"'],
                             check=True, capture_output=True, text=True).stdout.strip()
        assert out == expected
