"""Checks of the benchmark harness's own tools (benchmarks/)."""
