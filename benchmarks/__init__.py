"""Speed and memory benchmarks, run on demand: ``python -m benchmarks [--quick] [-k NAME]``."""
