"""The cluster state cache fed by the informers (Karpenter's ``state.Cluster``)."""
