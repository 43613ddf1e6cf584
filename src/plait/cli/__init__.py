"""plait's command line: an edge of the house.

``main.py`` parses arguments and calls ``asyncio.run`` (``services.py``: the worker and
serve commands); ``session.py`` drives runs against the engine (run, resume, retry),
``control.py`` acts on stored runs (approve, cancel), ``inspection.py`` reads history
through ``plait.observe`` and the run document (``plait.rundoc``, which the server
serves too); ``output.py``, ``records.py``, ``views.py`` and ``progress.py`` render
what happened.  No workflow logic lives here: everything the commands decide comes from
the core and the runtime.
"""
