"""ajax.modules."""
