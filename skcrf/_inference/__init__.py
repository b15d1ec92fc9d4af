"""Scores to answers: the compiled kernels and decoding.

Forward-backward, Viterbi and n-best kernels, blocks of packed sequences,
constraints, and the decoding of a fitted model.
"""
