"""Answers to weights: the objective and the trainers.

The objective, L-BFGS/OWL-QN, the online trainers, the training monitor and
log.
"""
