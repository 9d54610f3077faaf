"""Karpenter's `karpenter.sh` API models, keys and conditions (pure)."""
