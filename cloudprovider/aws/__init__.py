"""The AWS cloud provider: EC2NodeClass, instance catalog, pricing and launches."""
