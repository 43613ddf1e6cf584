"""Kept importable here: the code lives in ``plait.steps.secrets`` (what step types use
belongs to them, so that ``plait.steps`` never imports the runtime)."""

from ..steps.secrets import *  # noqa: F403
