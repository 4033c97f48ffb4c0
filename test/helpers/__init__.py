"""Helpers shared by the tests: servers started for a test, scheduler shortcuts, test doubles."""
