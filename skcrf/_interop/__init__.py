"""Support for other packages (eli5), installed without importing them."""
