"""Installed, the code imports as xaidash.data, xaidash.models, xaidash.explainers, xaidash.dashboard,
and nothing generic (`models`, `data`) shadows or is shadowed by a user's own packages."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("data", "models", "explainers", "dashboard")


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # a fresh interpreter imports torch, captum and the method registry
def test_users_own_models_and_data_packages_win_over_nothing_of_ours(tmp_path: Path) -> None:
    for name in ("models", "data"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"OWNER = 'user {name}'\n")
    code = (
        "from xaidash.explainers import explain\n"
        "import models, data\n"
        "print(models.OWNER, '|', data.OWNER, '|', explain.__module__)\n"
    )
    out = _python(code, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "user models | user data | xaidash.explainers.api"


def test_no_generic_top_level_package_is_installed(tmp_path: Path) -> None:
    code = f"import importlib.util\nprint([n for n in {LAYERS!r} if importlib.util.find_spec(n) is not None])\n"
    out = _python(code, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_every_sub_package_is_declared_for_installation() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {f"xaidash.{layer}": layer for layer in LAYERS}
    declared = set(config["packages"])
    on_disk = {
        "xaidash." + ".".join(init.parent.relative_to(REPO).parts)
        for layer in LAYERS
        for init in (REPO / layer).rglob("__init__.py")
    }
    assert on_disk == declared
    # Folders of Python files without an __init__.py would be left out of a wheel.
    for layer in LAYERS:
        for py in (REPO / layer).rglob("*.py"):
            assert (py.parent / "__init__.py").exists(), f"{py.parent} is not a package"


SYS_PATH_EDIT = re.compile(r"sys\.path\.(insert|append|extend|remove)|sys\.path\s*(\+?=(?!=)|\[)")


def test_no_sys_path_edits_in_the_code() -> None:
    for folder in (*LAYERS, "bench", "scripts", "tests"):
        for py in (REPO / folder).rglob("*.py"):
            if py == Path(__file__):
                continue
            assert not SYS_PATH_EDIT.search(py.read_text()), f"{py} edits sys.path"
