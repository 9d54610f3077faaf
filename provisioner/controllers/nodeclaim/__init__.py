"""NodeClaim controllers: lifecycle (launch, registration, initialization, liveness) and GC."""
