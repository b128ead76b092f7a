"""The scene the Scenes page explains: one of the run's test scenes by number (with its exact ground truth), or an
uploaded image of the size the model reads (no ground truth: no quality metrics)."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch
from PIL import Image, UnidentifiedImageError

from xaidash.dashboard.components.scene_cache import scene_test_split
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.services import content_key
from xaidash.data.scenes.types import SceneTarget
from xaidash.models.scenes.bundle import SceneBundle

TEST, UPLOAD = "A test scene", "An image of my own"
IMAGE_TYPES = ["png", "jpg", "jpeg", "bmp", "webp"]


@dataclass
class Scene:
    """One image (3, H, W) float in [0, 1], its ground truth (None for an upload), what to call it, and a key of its
    content for the caches."""

    image: torch.Tensor
    truth: SceneTarget | None
    name: str
    key: str


def read_upload(data: bytes) -> torch.Tensor:
    """An image file's bytes as (3, H, W) float in [0, 1] (ValueError with one line when it is not an image)."""
    try:
        picture = Image.open(io.BytesIO(data))
        picture.load()
    except (UnidentifiedImageError, OSError) as err:
        raise ValueError("This file is not an image this page can read (PNG, JPEG, BMP or WebP).") from err
    array = np.asarray(picture.convert("RGB"), dtype=np.float32) / 255.0
    return torch.from_numpy(array.copy()).permute(2, 0, 1).contiguous()


def fit_size(image: torch.Tensor, size: int | None, key: str) -> torch.Tensor | None:
    """The upload as the model reads it: as it is when its size fits, resized on request when not; None (with one
    line saying why) when it does not fit and the user has not asked for a resize."""
    h, w = int(image.shape[-2]), int(image.shape[-1])
    if size is None or (h, w) == (size, size):
        return image
    st.warning(
        f"This model reads {size} x {size} px scenes and the image is {w} x {h} px: resize it first, or tick "
        "“Resize it” below (the shapes will be stretched).",
        icon=":material/aspect_ratio:",
    )
    if not st.checkbox(f"Resize it to {size} x {size} px", key=f"{key}_resize"):
        return None
    resized = torch.nn.functional.interpolate(image[None], size=(size, size), mode="bilinear", antialias=True)
    return resized[0].clamp(0, 1)


def _test_scene(bundle: SceneBundle, key: str) -> Scene | None:
    dataset = bundle.dataset
    if not dataset:
        st.info(
            "This run names no data set, so it has no test scenes: upload an image instead.", icon=":material/info:"
        )
        return None
    try:
        with st.spinner(f"Reading the test scenes of {dataset}…"):
            split = scene_test_split(dataset)
    except Exception as err:  # noqa: BLE001 - a data set of one's own may be gone: say so, offer the upload
        show_error(err, f"The test scenes of {dataset} cannot be read")
        return None
    if not len(split):
        st.info(f"{dataset} has no test scenes: upload an image instead.", icon=":material/info:")
        return None
    index = int(
        st.number_input(
            f"Test scene (0 to {len(split) - 1})",
            min_value=0,
            max_value=len(split) - 1,
            value=0,
            step=1,
            key=f"{key}_index",
            help=f"a scene of {dataset}'s test split, with its true boxes and masks (the quality metrics need them)",
        )
    )
    name = f"{dataset} test · {split.names[index]}"
    return Scene(split.images[index], split.targets[index], name, f"{dataset}/test/{index}")


def _uploaded_scene(bundle: SceneBundle, key: str) -> Scene | None:
    size = bundle.image_size
    upload = st.file_uploader(
        "An image" + (f" ({size} x {size} px)" if size else ""),
        type=IMAGE_TYPES,
        key=f"{key}_upload",
        help="a scene of your own; it has no ground truth, so its maps get no quality metrics",
    )
    if upload is None:
        st.caption("Upload an image to explain what the model finds in it.")
        return None
    try:
        image = read_upload(upload.getvalue())
    except ValueError as err:
        st.error(str(err), icon=":material/broken_image:")
        return None
    fitted = fit_size(image, size, key)
    if fitted is None:
        return None
    return Scene(fitted, None, upload.name, f"upload/{content_key(fitted)}")


def scene_picker(bundle: SceneBundle, key: str = "scenes") -> Scene | None:
    """The source (a test scene, or an upload) and the scene itself; None (with what to do) while there is none."""
    source = st.radio("Scene", [TEST, UPLOAD], horizontal=True, key=f"{key}_source", label_visibility="collapsed")
    return _test_scene(bundle, key) if source == TEST else _uploaded_scene(bundle, key)
