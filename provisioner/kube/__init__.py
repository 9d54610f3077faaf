"""The Kubernetes port: client Protocol, real adapter and in-memory API."""
