"""Looking inside a model: attention, effective receptive fields, embedding projections, distance to training data."""
