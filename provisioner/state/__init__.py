"""The cluster state cache fed by the informers."""
