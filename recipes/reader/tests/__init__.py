"""The reader recipe's tests: ``python -m pytest recipes/reader``."""
