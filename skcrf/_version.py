"""The version of skcrf (read by the build without importing the package)."""

__version__ = "0.1.0.dev0"
