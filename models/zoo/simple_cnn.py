"""The seeds' SimpleCNN, kept exactly: 1x28x28 input, 10,890 parameters."""

from __future__ import annotations

from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.models.registry import ModelSpec, register
from xaidash.models.training.recipes import Recipe


class SimpleCNN(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 4, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(4, 8, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3),
            nn.ReLU(),
        )
        self.flatten = nn.Flatten()
        self.classifier = nn.Sequential(nn.Linear(72, 120), nn.ReLU(), nn.Linear(120, num_classes))

    def forward(self, x):
        return self.classifier(self.flatten(self.features(x)))


def _fits(info: DatasetInfo) -> str | None:
    if tuple(info.input_shape) != (1, 28, 28):
        return f"needs 1x28x28 images, got {'x'.join(map(str, info.input_shape))}"
    return None


# Tested on this project's 2-core CPU; expected_acc is the test accuracy measured there (README: Recipes).
RECIPES = {
    "mnist": Recipe(epochs=3, batch_size=64, lr=1e-2, optimizer="adam", expected_acc=0.984, recommended=True),
    "fashion_mnist": Recipe(epochs=3, batch_size=64, lr=1e-2, optimizer="adam", expected_acc=0.862, recommended=True),
    "image": Recipe(epochs=3, batch_size=64, lr=1e-2, optimizer="adam"),
}

register(
    ModelSpec(
        name="simple_cnn",
        modality="image",
        build=lambda info, **kw: SimpleCNN(info.num_classes),
        description="Three 3x3 convolutions and two linear layers (10,890 parameters for 10 classes).",
        fits=_fits,
        input_note="1x28x28 grey images (MNIST, Fashion-MNIST)",
        last_conv="features.6",
        conv_layers=("features.0", "features.3", "features.6"),
        recipes=RECIPES,
    )
)
