"""Views of workflows and runs: graph export, metrics, Gantt charts."""
