"""Images: float tensors (C, H, W) in [0, 1], normalised per channel for the model; a map scores pixels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from xaidash.data.errors import ExplainError
from xaidash.data.modalities.base import MODALITIES, GroundTruth, Modality
from xaidash.data.registry import DatasetInfo, ImageSplit, Split
from xaidash.data.transforms import normalize

IMAGE_UPLOADS = ("png", "jpg", "jpeg", "bmp", "webp", "gif", "tif", "tiff")


@dataclass(frozen=True)
class ImageModality(Modality):
    def batch(self, raws: Sequence[Any]) -> torch.Tensor:
        if not raws:
            raise ExplainError("No inputs to explain: pick or upload at least one.")
        return torch.stack([torch.as_tensor(r) for r in raws])

    def as_batch(self, inputs: Any) -> torch.Tensor:
        x = torch.as_tensor(inputs, dtype=torch.float32)
        return x.unsqueeze(0) if x.dim() == 3 else x

    def prepare(self, inputs: Any, info: DatasetInfo, tokenizer: Any, device: torch.device) -> torch.Tensor:
        return normalize(self.as_batch(inputs).to(device), info)

    def example(self, info: DatasetInfo, tokenizer: Any, n: int = 1) -> torch.Tensor:
        return torch.full((n, *info.input_shape), 0.5)

    def describe(self, input_shape: Sequence[int]) -> str:
        return f"{'x'.join(map(str, input_shape))} images" if input_shape else "images"

    def one_line(self, raw: Any, info: DatasetInfo, chars: int = 200) -> str:
        return f"{'x'.join(map(str, tuple(torch.as_tensor(raw).shape)))} image"[:chars]

    def same_inputs(self, a: Sequence[int], b: Sequence[int]) -> bool:
        return tuple(a) == tuple(b)

    def item(self, split: Split, index: int) -> torch.Tensor:
        assert isinstance(split, ImageSplit)
        return split.image(index).float()

    def items(self, split: Split, indices: Sequence[int]) -> torch.Tensor:
        assert isinstance(split, ImageSplit)
        return split.batch([int(i) for i in indices]).float()

    def ground_truth(self, split: Split, indices: Sequence[int]) -> GroundTruth:
        if not isinstance(split, ImageSplit) or split.masks is None:
            return GroundTruth()
        return GroundTruth(
            masks=split.masks[torch.as_tensor(list(indices), dtype=torch.long)].cpu().numpy().astype(bool)
        )

    def check_split(self, split: Split, dataset: str) -> None:
        if not isinstance(split, ImageSplit):
            raise self.wrong_split(dataset)


IMAGE = MODALITIES.register(
    ImageModality(
        id="image",
        label="images",
        unit="pixel",
        units="pixels",
        sample="image",
        augmentations=("none", "shift", "flip", "shift+flip"),
        generic_training=(
            ("epochs", 5),
            ("batch_size", 128),
            ("lr", 2e-3),
            ("augment", "shift"),
            ("weight_decay", 0.01),
        ),
        spatial=True,
        local=True,
        gallery_open=True,
        sources=("upload",),
        upload_types=IMAGE_UPLOADS,
        pictured=True,
    )
)
