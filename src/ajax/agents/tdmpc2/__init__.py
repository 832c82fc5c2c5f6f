"""ajax.agents.tdmpc2."""
