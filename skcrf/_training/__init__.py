"""Answers to weights: the objective, L-BFGS/OWL-QN, the online trainers,
the training monitor and log, and the fit driver.
"""
