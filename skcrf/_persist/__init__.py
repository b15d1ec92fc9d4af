"""Fitted state to files and back.

Tagged JSON values, the npz model format, CRFsuite model files.
"""
