"""Run folders: the store, their declared schema, the writer's lock, checkpoints, and whether a run is good enough to explain."""
