"""The pure core: model, loading, validation, expressions and the run state machine.

Nothing in here does I/O, reads a clock or draws random numbers: those are passed in.
"""
