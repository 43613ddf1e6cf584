"""Kept importable here: the code lives in ``plait.steps.netpolicy`` (what step types use
belongs to them, so that ``plait.steps`` never imports the runtime)."""

from ..steps.netpolicy import *  # noqa: F403
