"""``python -m plait``: the same as the ``plait`` command."""

from plait.cli.main import main

main()
