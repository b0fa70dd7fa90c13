"""The Attack page: the per-person attack, the learned attacker, and their cached computations."""
