"""The quick-start demo: the runs that make every page meaningful, trained one after another with their recipes.

An image CNN with global average pooling (Explain, Compare, CAM, receptive fields, embeddings), a
ViT (attention on images) and a text transformer (attention and word attributions), each on a
built-in data set that works offline. `xaidash demo` and the Home page's quick-start button train these.
"""

from __future__ import annotations

DEMO_RUNS: tuple[tuple[str, str], ...] = (
    ("shapes", "resnet_small"),
    ("shapes", "vit_tiny"),
    ("cues", "text_transformer"),
)
