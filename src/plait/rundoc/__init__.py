"""The run document: a stored run as JSON, with what its history adds (waits, model
calls and their tokens, child runs, logs).  ``plait show --json`` prints it and the
server's ``GET /api/runs/{id}`` serves it; neither owns it, so neither imports the other.
"""
