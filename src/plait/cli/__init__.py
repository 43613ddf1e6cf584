"""plait's command line: an edge of the house.

``main.py`` parses arguments and calls ``asyncio.run``; ``session.py`` drives one run
against the engine; ``output.py`` and ``progress.py`` render what happened.  No workflow
logic lives here: everything the commands decide comes from the core and the runtime.
"""
