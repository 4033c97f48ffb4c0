"""Example pipelines, runnable with ``luigi --module examples.<name> <Task> --local-scheduler``."""
