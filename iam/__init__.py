"""IAM policy generation for the controller and node roles (pure)."""
