"""ajax.training."""
