"""What runs on Dask workers, and CoNLL files read there (for :mod:`skcrf.dask`).
"""
