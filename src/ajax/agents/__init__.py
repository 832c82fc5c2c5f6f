"""The agents, by command-line name."""
