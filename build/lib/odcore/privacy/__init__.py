"""The release and what it protects: Laplace noise and threshold, contribution bounding, accounting (basic,
advanced, Rényi, exact PLD), the membership attack, the release designer and its utility measures.
"""
