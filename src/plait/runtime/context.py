"""Kept importable here: the code lives in ``plait.steps.context`` (what step types use
belongs to them, so that ``plait.steps`` never imports the runtime)."""

from ..steps.context import *  # noqa: F403
