"""Tokens to numbers: the lowest layer above the utilities.

Validation of sequences, tokens and labels, the encoded data types, the
compiled vocabulary, streaming, vector features and the raw-token featurizer.
"""
