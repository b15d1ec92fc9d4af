"""Utilities that every layer may use.

Threads and the BLAS limit, the packed layout, the progress line, atomic
file writes, shared C headers.
"""
