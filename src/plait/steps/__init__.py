"""Step types: one module per type, and the registry that names them."""

from .registry import StepCall, StepType, get_step_type, register_step_type

__all__ = ["StepCall", "StepType", "get_step_type", "register_step_type"]
