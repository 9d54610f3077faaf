"""The NodeClass controller (status, finalizer, cleanup on delete)."""
