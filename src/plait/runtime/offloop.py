"""Kept importable here: the code lives in ``plait.steps.offloop`` (what step types use
belongs to them, so that ``plait.steps`` never imports the runtime)."""

from ..steps.offloop import *  # noqa: F403
