"""PID policies: an actor that is a PID controller with learned gains (spec 002).

Defined in :mod:`ajax.networks.pid_actor` (the networks build it, and ``ajax.networks``
imports nothing from ``ajax.modules``); this is the address spec 002 documents.
"""

from __future__ import annotations

from ajax.networks.pid_actor import (
    GAIN_KINDS,
    PIDActor,
    PIDLaw,
    PIDPolicy,
    check_pid_actor,
    pid_gains,
    pid_law,
    pid_python_only,
    pid_terms,
)

__all__ = [
    "GAIN_KINDS",
    "PIDActor",
    "PIDLaw",
    "PIDPolicy",
    "check_pid_actor",
    "pid_gains",
    "pid_law",
    "pid_python_only",
    "pid_terms",
]
