"""CapacityBuffer status."""
