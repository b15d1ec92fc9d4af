"""Utilities every layer may use: threads and the BLAS limit, the packed
layout, the progress line, atomic file writes, shared C headers.
"""
