"""Detection and segmentation models of scenes: the model registry (`zoo`), what a prediction is (`predictions`), a
loaded model (`bundle`), training (`train`) with Stop and resume, evaluation (`evaluate`: mAP, mIoU), loading a run
(`loading`) and the `xaidash scenes train|evaluate` commands (`cli`)."""
