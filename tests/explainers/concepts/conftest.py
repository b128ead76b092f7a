from __future__ import annotations

import pytest
from concept_runs import trained_colour_run


@pytest.fixture(scope="session")
def colour_run(tmp_path_factory: pytest.TempPathFactory):
    return trained_colour_run(tmp_path_factory)
