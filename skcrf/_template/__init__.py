"""Feature templates: raw tokens to attributes (plans, parsers, expanders)."""
