"""Benchmarks, run by hand; results go into the issue notes, never into timed tests."""
