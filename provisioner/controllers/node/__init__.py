"""Node controllers: termination (the ``karpenter.sh/termination`` finalizer)."""
