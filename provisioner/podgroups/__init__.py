"""Pod-group, quota, preemptibility and GPU-fraction detection across schedulers (pure)."""
