"""Benchmarks (not tests): workloads, runner, results in docs/benchmarks.md."""
