"""Trajectory recovery from aggregate counts per cell per slot (Xu et al. 2017), scored against the true traces.
Modules: aggregates (cell sequences, counts, plain files), phases (the attack), score, defences, experiment.
"""
