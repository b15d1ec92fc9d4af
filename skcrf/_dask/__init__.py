"""What runs on Dask workers, and CoNLL files read there.

The private half of :mod:`skcrf.dask`.
"""
