"""The release and what it protects: Laplace noise and threshold on the OD counts (bounded in :mod:`odcore.od`),
accounting (basic, advanced, Rényi, exact PLD), the membership attack, the release designer and its utility measures.
"""
