"""NodePool controllers: validation/readiness conditions and the resource counter."""
