"""ajax.environments."""
