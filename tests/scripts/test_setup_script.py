"""scripts/setup.sh: what the start and test commands install, and which torch build, without installing anything.

The script runs in a copy of the repository whose .venv holds stand-ins for python and pip: pip records its
arguments; python fails `import torch` (so torch gets installed) and answers the CPU index probe as told.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

FAKE_PYTHON = """#!/usr/bin/env bash
# A stand-in: torch is missing until pip 'installs' it; stdin scripts are the CPU index probe.
if [ "$1" = "-" ]; then cat >/dev/null; [ "$FAKE_CPU_INDEX" = up ]; exit; fi
if [ "$1" = "-c" ] && [[ "$2" == "import torch, torchvision" ]]; then exit 1; fi
exit 0
"""
FAKE_PIP = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/../pip.log"
"""
ACTIVATE = 'export PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd):$PATH"\n'


def _tool(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    _tool(bin_dir / "python", FAKE_PYTHON)
    _tool(bin_dir / "pip", FAKE_PIP)
    (bin_dir / "activate").write_text(ACTIVATE)
    (tmp_path / ".venv" / ".xaidash-umap-warm").touch()  # the numba warm-up is real work: not here
    return tmp_path


def _setup(repo: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    environ = {k: v for k, v in os.environ.items() if k != "XAIDASH_TORCH"}
    log = repo / ".venv" / "pip.log"
    log.unlink(missing_ok=True)
    done = subprocess.run(
        ["bash", "scripts/setup.sh", *args],
        cwd=repo,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, log.read_text().splitlines() if log.exists() else []


def _has_gpu() -> bool:
    return Path("/proc/driver/nvidia/version").exists()


def test_start_installs_what_running_needs_and_test_adds_the_test_extra(repo: Path) -> None:
    done, pip = _setup(repo, FAKE_CPU_INDEX="up")
    assert done.returncode == 0, done.stderr
    assert any(line.endswith("-e .") for line in pip), pip
    assert not any("[test]" in line for line in pip), pip
    done, pip = _setup(repo, "test", FAKE_CPU_INDEX="up")
    assert done.returncode == 0, done.stderr
    assert any(line.endswith("-e .[test]") for line in pip), pip
    again, _ = _setup(repo, FAKE_CPU_INDEX="up")  # the test install holds everything running needs
    assert "already installed" in again.stderr


@pytest.mark.skipif(_has_gpu(), reason="the CPU build is the default only without an NVIDIA GPU")
def test_without_a_gpu_torch_comes_from_the_cpu_index_and_says_so(repo: Path) -> None:
    done, pip = _setup(repo, FAKE_CPU_INDEX="up")
    torch_lines = [line for line in pip if "torch==" in line]
    assert torch_lines and CPU_INDEX in torch_lines[0], pip
    assert "CPU build" in done.stderr and "XAIDASH_TORCH=cuda" in done.stderr


@pytest.mark.skipif(_has_gpu(), reason="the CPU build is the default only without an NVIDIA GPU")
def test_an_unreachable_cpu_index_falls_back_to_pypi_and_says_why(repo: Path) -> None:
    done, pip = _setup(repo, FAKE_CPU_INDEX="down")
    assert done.returncode == 0, done.stderr
    torch_lines = [line for line in pip if "torch==" in line]
    assert torch_lines and CPU_INDEX not in torch_lines[0], pip
    assert "cannot be reached" in done.stderr


def test_xaidash_torch_overrides_the_choice(repo: Path) -> None:
    _, pip = _setup(repo, FAKE_CPU_INDEX="up", XAIDASH_TORCH="cuda")
    torch_lines = [line for line in pip if "torch==" in line]
    assert torch_lines and CPU_INDEX not in torch_lines[0], pip
    (repo / ".venv" / ".xaidash-setup-run").unlink()
    _, pip = _setup(repo, FAKE_CPU_INDEX="up", XAIDASH_TORCH="torch==9.9 torchvision==9.9")
    assert any("torch==9.9 torchvision==9.9" in line for line in pip), pip


def test_an_unknown_level_gets_one_line_of_usage(repo: Path) -> None:
    done, _ = _setup(repo, "everything")
    assert done.returncode == 2
    assert done.stderr.strip().startswith("usage: scripts/setup.sh [run|test]")
    assert "Traceback" not in done.stderr
