"""Experiments as researchers run them: statistics over seeds with confidence intervals
(:mod:`ajax.experiments.stats`), the published curves of the official code
(:mod:`ajax.experiments.reference`), and ``ajax compare`` (:mod:`ajax.experiments.compare`).

This layer reads run directories; it may import :mod:`ajax.training`, never the reverse.
"""
