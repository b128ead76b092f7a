"""The scene sets: the generated ones by id (`scenes`, `scenes_hard`) and a user's own by prefix
(`coco:<annotations.json>`, `masks:<folder>`).

`scene_set(name)` gives a set's facts without loading its images (classes, image size); `load_scene_set(name,
split, count)` gives a `SceneSplit`. Generated splits are made once per process and handed out as copies, so a
caller editing tensors in place cannot change what the next caller gets."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from threading import Lock

from xaidash.data.errors import DatasetError
from xaidash.data.scenes import coco, generate, mask_folder
from xaidash.data.scenes.own import OwnSceneSet
from xaidash.data.scenes.types import SceneSplit
from xaidash.data.specs import Registry, Spec

SPLITS = generate.SPLITS


@dataclass(frozen=True)
class SceneSetSpec(Spec):
    """One scene set's facts. `image_size`: the side of every (square) image, None when the images vary;
    `generated`: drawn here with exact ground truth; `has_masks`: instance masks in the ground truth (segmenters
    need them); `load(split, count)`: the first `count` images of a split (None: all)."""

    id: str
    label: str
    description: str
    classes: tuple[str, ...]
    image_size: int | None
    generated: bool
    has_masks: bool
    load: Callable[[str, int | None], SceneSplit]


@dataclass(frozen=True)
class SceneSetFactory(Spec):
    """A user's own scene set named by a prefix: `coco:<annotations.json>`; `build(argument)` reads what the facts
    need (annotations, class names) and returns the set's spec."""

    id: str
    argument: str
    help: str
    build: Callable[[str], SceneSetSpec]

    @property
    def form(self) -> str:
        return f"{self.id}:{self.argument}"


def _unknown(name: Hashable, known: list[str]) -> str:
    forms = ", ".join(f.form for f in SCENE_FACTORIES)
    own = f"; or your own: {forms}" if forms else ""
    return f"Unknown scene set {name!r}. Known: {', '.join(known)}{own}."


SCENE_SETS: Registry[SceneSetSpec] = Registry("scene set", error=DatasetError, unknown=_unknown)
SCENE_FACTORIES: Registry[SceneSetFactory] = Registry("scene set prefix", error=DatasetError)

_cache_lock = Lock()


def scene_set_names() -> list[str]:
    """The built-in scene sets' ids, in registration order."""
    return [s.id for s in SCENE_SETS]


def own_scene_forms() -> list[str]:
    """How a user names their own scene data: 'coco:<annotations.json>', 'masks:<folder>'."""
    return [f.form for f in SCENE_FACTORIES]


def scene_set(name: str) -> SceneSetSpec:
    """The spec of a built-in set or of `coco:<json>` / `masks:<folder>` (reads only the annotations or the class
    names, never the images); DatasetError naming the known sets for anything else."""
    name = str(name).strip()
    prefix, sep, argument = name.partition(":")
    factory = SCENE_FACTORIES.find(prefix) if sep else None
    if factory is not None:
        if not argument.strip():
            raise DatasetError(f"No path given: write it after the prefix, e.g. {factory.form}.")
        return factory.build(argument.strip())
    return SCENE_SETS.get(name)


def load_scene_set(name: str, split: str = "test", count: int | None = None) -> SceneSplit:
    """Split `split` ('train', 'val' or 'test') of a scene set, its first `count` images (None: all). Built-in
    sets are generated once per process; every call gets tensors of its own."""
    if split not in SPLITS:
        raise DatasetError(f"Unknown split {split!r}: use train, val or test.")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise DatasetError(f"count must be a whole number of images, 1 or more, got {count!r}.")
    return scene_set(name).load(split, count)


def _generated(set_id: str, style: generate.SceneStyle) -> Callable[[str, int | None], SceneSplit]:
    """The loader of a generated set: scenes are drawn once per process and kept packed (8-bit images, one object
    number per pixel); each call unpacks new tensors, so no caller can change what the next one gets. Scene i does
    not depend on the count, so a longer cut extends a shorter one."""
    packed: dict[str, list[generate.PackedScene]] = {}

    def load(split: str, count: int | None) -> SceneSplit:
        if split not in generate.SPLIT_SIZES:
            raise DatasetError(f"Unknown split {split!r}: use train, val or test.")
        full = generate.SPLIT_SIZES[split]
        wanted = full if count is None else min(count, full)
        with _cache_lock:
            have = packed.setdefault(split, [])
            if len(have) < wanted:
                have += generate.draw_split(style, split, wanted, start=len(have))
            scenes = have[:wanted]
        return generate.unpack(scenes, split, set_id)

    return load


def _splits_text() -> str:
    return ", ".join(f"{n:,} {s}" for s, n in generate.SPLIT_SIZES.items())


SCENE_SETS.register(
    SceneSetSpec(
        id="scenes",
        label="Scenes (generated shapes)",
        description=(
            f"Generated {generate.SCENES.size}x{generate.SCENES.size} px scenes of one to five shapes (circle, "
            "square, triangle, cross; 12-40 px, colour independent of the class) on noisy low-frequency "
            "backgrounds; later shapes may hide up to 40% of earlier ones. Exact boxes, instance masks of the "
            f"visible pixels and semantic masks. {_splits_text()}; works offline."
        ),
        classes=generate.CLASSES,
        image_size=generate.SCENES.size,
        generated=True,
        has_masks=True,
        load=_generated("scenes", generate.SCENES),
    )
)
SCENE_SETS.register(
    SceneSetSpec(
        id="scenes_hard",
        label="Scenes, hard (clutter and occlusion)",
        description=(
            f"Generated {generate.SCENES_HARD.size}x{generate.SCENES_HARD.size} px scenes of one to six rotated "
            "shapes (circle, square, triangle, cross; 12-44 px) placed against each other (each at least 30% "
            "visible) over clutter: strokes and elongated blobs that are no object. Exact boxes, instance and "
            f"semantic masks. {_splits_text()}; works offline."
        ),
        classes=generate.CLASSES,
        image_size=generate.SCENES_HARD.size,
        generated=True,
        has_masks=True,
        load=_generated("scenes_hard", generate.SCENES_HARD),
    )
)


def _own(prefix: str, read: Callable[[str], OwnSceneSet]) -> Callable[[str], SceneSetSpec]:
    def build(argument: str) -> SceneSetSpec:
        found = read(argument)
        return SceneSetSpec(
            id=f"{prefix}:{argument}",
            label=found.label,
            description=found.description,
            classes=found.classes,
            image_size=found.image_size,
            generated=False,
            has_masks=found.has_masks,
            load=found.load,
        )

    return build


SCENE_FACTORIES.register(
    SceneSetFactory(
        id="coco",
        argument="<annotations.json>",
        help="A COCO-format instances file; its images beside it or in its images/ folder.",
        build=_own("coco", coco.coco_scene_set),
    )
)
SCENE_FACTORIES.register(
    SceneSetFactory(
        id="masks",
        argument="<folder>",
        help="A folder with images/ and, for each image, a PNG of class indices in masks/; optional classes.txt.",
        build=_own("masks", mask_folder.mask_scene_set),
    )
)
