"""The package version, kept in one place."""

VERSION = "3.8.1"
