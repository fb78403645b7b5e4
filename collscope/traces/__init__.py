"""Training traces."""
