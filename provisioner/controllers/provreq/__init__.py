"""The ProvisioningRequest controller."""
