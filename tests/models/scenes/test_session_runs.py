"""The session's shared scene runs (tests/support/scene_runs.py) are good enough to explain: they find and outline
most objects, so other tests' maps are of a model that learned something."""

from __future__ import annotations

import pytest

from tests.support.scene_runs import trained_scene_run
from xaidash.models.scenes.quality import headline_metric, scene_run_warning


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "floor"), [("detect", 0.6), ("segment", 0.6)])
def test_the_shared_runs_learned_their_task(tmp_path_factory: pytest.TempPathFactory, kind: str, floor: float) -> None:
    run = trained_scene_run(tmp_path_factory, kind)  # type: ignore[arg-type]
    found = headline_metric(run.summary())
    assert found is not None and found[1] >= floor, found
    assert scene_run_warning(run) is None
