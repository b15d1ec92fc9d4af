"""Utilities that every layer may use.

Threads and the BLAS limit, the packed layout, the progress line, atomic
file writes, the C headers and Cython typedefs (``_typedefs.pxd``) that the
compiled modules share.
"""
