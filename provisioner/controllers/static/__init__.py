"""Static NodePools (``spec.replicas``)."""
