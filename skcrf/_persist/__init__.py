"""Fitted state to files and back: tagged JSON values, the npz model format,
CRFsuite model files.
"""
