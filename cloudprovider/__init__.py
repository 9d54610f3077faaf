"""Provider-neutral cloud port: instance types, offerings, errors and the CloudProvider Protocol."""
