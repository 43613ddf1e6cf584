"""Step types: one module per type, the registry that names them (with their traits),
and what a step attempt is given to work with: its context (``context``), the binding
of a python step's parameters (``binding``), the network policy and client
(``netpolicy``, ``netclient``), secrets and their redaction (``secrets``) and renders
off the event loop (``offloop``).  Nothing here imports the runtime: it lends what the
steps need through ``StepCall`` and ``Services``."""

from .registry import StepCall, StepType, get_step_type, register_step_type

__all__ = ["StepCall", "StepType", "get_step_type", "register_step_type"]
