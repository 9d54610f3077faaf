"""Jointer's Karpenter core: API models, scheduling algebra, controllers and the CLI.

Importing this package re-exports nothing, so `provisioner.apis` never drags in controllers.
"""
