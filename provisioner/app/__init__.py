"""Composition root: settings, wiring and the `jointer` command line."""
