"""Scenes: images with several objects, each with its class, box and mask (detection and segmentation data).

`types` holds what every layer shares (`SceneTarget`, `SceneSplit`); `generate` draws the built-in scenes with exact
ground truth; `coco` and `mask_folder` read a user's annotations; `registry` names the scene sets."""
