"""NodeOverlay status."""
