"""The scene set registry: names, facts without loading, cached generated splits handed out as copies, cuts, and
one-sentence refusals naming what exists."""

from __future__ import annotations

import pytest
import torch

from xaidash.data.errors import DatasetError
from xaidash.data.scenes import generate
from xaidash.data.scenes.generate import CLASSES, SCENES
from xaidash.data.scenes.registry import (
    SCENE_SETS,
    SceneSetSpec,
    load_scene_set,
    own_scene_forms,
    scene_set,
    scene_set_names,
)


def test_names_and_facts():
    assert scene_set_names() == ["scenes", "scenes_hard"]
    assert own_scene_forms() == ["coco:<annotations.json>", "masks:<folder>"]
    easy, hard = scene_set("scenes"), scene_set("scenes_hard")
    assert isinstance(easy, SceneSetSpec) and easy.classes == CLASSES == hard.classes
    assert (easy.image_size, hard.image_size) == (96, 128)
    assert easy.generated and easy.has_masks and hard.generated and hard.has_masks
    assert "96x96" in easy.description and "clutter" in hard.description
    assert easy.label and hard.label != easy.label
    assert [s.id for s in SCENE_SETS] == scene_set_names()


def test_load_matches_the_generator_and_cuts_are_prefixes():
    first = load_scene_set("scenes", "val", 5)
    assert len(first) == 5 and first.name == "val" and first.classes == CLASSES
    direct = generate.generate(SCENES, "val", 5, name="scenes")
    for a, b in zip(first.images, direct.images, strict=True):
        assert torch.equal(a, b)
    more = load_scene_set("scenes", "val", 9)  # longer than what is cached: generated again, same first five
    assert len(more) == 9 and torch.equal(more.images[4], first.images[4])
    assert torch.equal(more.targets[4].masks, first.targets[4].masks)
    assert len(load_scene_set("scenes", "val", 5000)) == 200
    assert len(load_scene_set("scenes", "val")) == 200
    assert load_scene_set("scenes", "val", 3).names == ["scenes val 0", "scenes val 1", "scenes val 2"]


def test_callers_get_copies():
    a = load_scene_set("scenes", "test", 2)
    a.images[0].zero_()
    a.targets[0].boxes.zero_()
    assert a.targets[0].masks is not None
    a.targets[0].masks.zero_()
    a.names.append("x")
    b = load_scene_set("scenes", "test", 2)
    assert float(b.images[0].sum()) > 0 and float(b.targets[0].boxes.sum()) > 0
    assert b.targets[0].masks is not None and bool(b.targets[0].masks.any()) and len(b.names) == 2


def test_cached_after_the_first_load(monkeypatch):
    load_scene_set("scenes_hard", "test", 20)
    calls: list[tuple[int | None, int]] = []
    draw = generate.draw_split

    def counted(style, split, count=None, start=0):
        calls.append((count, start))
        return draw(style, split, count, start)

    monkeypatch.setattr(generate, "draw_split", counted)
    assert len(load_scene_set("scenes_hard", "test", 10)) == 10
    assert calls == []  # served from the 20 drawn before
    assert len(load_scene_set("scenes_hard", "test", 30)) == 30
    assert calls == [(30, 20)]  # only the ten new scenes are drawn


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda: scene_set("nope"), "Unknown scene set 'nope'. Known: scenes, scenes_hard; or your own: coco:"),
        (lambda: load_scene_set("shapes"), "Unknown scene set 'shapes'"),
        (lambda: scene_set("zip:/x"), "Unknown scene set 'zip:/x'"),
        (lambda: load_scene_set("scenes", "dev"), "Unknown split 'dev': use train, val or test."),
        (lambda: load_scene_set("scenes", "test", 0), "count must be a whole number of images, 1 or more, got 0."),
        (lambda: load_scene_set("scenes", "test", 2.5), "got 2.5"),
        (lambda: scene_set("masks:"), "No path given: write it after the prefix, e.g. masks:<folder>."),
    ],
)
def test_refusals(call, expected):
    with pytest.raises(DatasetError) as caught:
        call()
    assert expected in str(caught.value) and "\n" not in str(caught.value)
