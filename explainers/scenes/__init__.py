"""Explaining detectors and segmenters: one explained output is one detected box's score (`BoxTarget`) or one class's
logits summed over a region (`RegionTarget`). The scene method registry (`registry`), the methods (one module
each), the quality metrics against the scenes' exact ground truth (`metrics`), the session (`api.explain_scene`),
the figures (`figures`) and the `xaidash scenes explain` command (`cli`)."""
