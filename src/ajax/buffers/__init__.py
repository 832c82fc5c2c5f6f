"""ajax.buffers."""
