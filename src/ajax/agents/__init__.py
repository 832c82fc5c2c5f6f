"""ajax.agents."""
