"""Provisioning: provisionable pods, batching, planning and NodeClaim creation."""
