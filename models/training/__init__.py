"""Training: the engine, its batches and steps, several processes (DDP), recipes and the quick-start demo."""
