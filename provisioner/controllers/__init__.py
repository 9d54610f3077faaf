"""Reconcilers: provisioning, nodeclaim lifecycle, disruption, termination."""
