"""ajax.agents.dreamerv3."""
