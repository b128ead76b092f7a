"""Looking inside a model without Streamlit: receptive fields, architecture summaries, activations."""
