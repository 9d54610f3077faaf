"""Scheduling algebra: quantities, resource lists, requirements, taints and affinity (pure)."""
