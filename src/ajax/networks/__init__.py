"""ajax.networks."""
