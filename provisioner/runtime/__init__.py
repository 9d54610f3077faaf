"""Controller runtime: the Reconciler protocol, results, clocks and the work queue."""
