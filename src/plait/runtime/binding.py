"""Kept importable here: the code lives in ``plait.steps.binding`` (what step types use
belongs to them, so that ``plait.steps`` never imports the runtime)."""

from ..steps.binding import *  # noqa: F403
