"""The generated scenes the file-reading tests write out and compare with."""

from __future__ import annotations

import pytest

from xaidash.data.scenes.generate import SCENES, generate
from xaidash.data.scenes.types import SceneSplit


@pytest.fixture(scope="session")
def source() -> SceneSplit:
    """12 generated scenes: the truth the written files hold."""
    return generate(SCENES, "test", 12, name="scenes")
