"""Pure bin-packing optimisation: problem types, validation, greedy, bounds and CP-SAT."""
