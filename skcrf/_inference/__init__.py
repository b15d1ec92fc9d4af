"""Scores to answers: the compiled forward-backward, Viterbi and n-best
kernels, blocks of packed sequences, constraints and decoding of a fitted model.
"""
