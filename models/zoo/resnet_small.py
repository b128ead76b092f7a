"""A small ResNet: residual blocks with BatchNorm, global average pooling, one linear layer (so CAM applies)."""

from __future__ import annotations

from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.models.registry import ModelSpec, register
from xaidash.models.training.recipes import Recipe


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a shortcut; each ReLU is its own module (DeepLift needs that)."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        self.relu2 = nn.ReLU()

    def forward(self, x):
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu2(out + self.shortcut(x))


class ResNetSmall(nn.Module):
    def __init__(self, in_channels: int, num_classes: int, widths: tuple[int, ...] = (32, 64, 128)):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()
        )
        blocks, cin = [], widths[0]
        for i, w in enumerate(widths):
            blocks.append(BasicBlock(cin, w, stride=1 if i == 0 else 2))
            cin = w
        self.layers = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        return self.fc(self.flatten(self.pool(self.layers(self.stem(x)))))


_WIDTHS = (16, 32, 64)


def _fits(info: DatasetInfo) -> str | None:
    if len(info.input_shape) != 3 or min(info.input_shape[1:]) < 8:
        return "needs images of at least 8x8 pixels"
    return None


# Tested on this project's 2-core CPU; expected_acc is the test accuracy measured there (README: Recipes).
RECIPES = {
    "shapes": Recipe(epochs=3, batch_size=128, lr=3e-3, weight_decay=0.05, expected_acc=0.997, recommended=True),
    "digits": Recipe(epochs=10, batch_size=64, lr=3e-3, weight_decay=0.05, expected_acc=0.983, recommended=True),
    "mnist": Recipe(epochs=1, batch_size=128, lr=3e-3, weight_decay=0.05, expected_acc=0.989),
    "fashion_mnist": Recipe(epochs=1, batch_size=128, lr=3e-3, weight_decay=0.05, expected_acc=0.874),
    # Not measured (not available offline here): the usual small-ResNet CIFAR settings, scaled to a few epochs.
    "cifar10": Recipe(epochs=15, batch_size=128, lr=3e-3, weight_decay=0.05, augment="shift+flip", recommended=True),
    "image": Recipe(epochs=5, batch_size=128, lr=3e-3, weight_decay=0.05, augment="shift"),
}

register(
    ModelSpec(
        name="resnet_small",
        modality="image",
        build=lambda info, **kw: ResNetSmall(info.input_shape[0], info.num_classes, _WIDTHS),
        description="Three residual blocks (16/32/64 channels) with BatchNorm, global average pooling, one linear layer.",
        fits=_fits,
        input_note="any image of at least 8x8, any number of channels",
        last_conv="layers.2",  # the block's output is exactly what global average pooling reads
        conv_layers=("stem", "layers.0", "layers.1", "layers.2"),
        gap_classifier="fc",
        recipes=RECIPES,
    )
)
