"""pylogq's version (pyproject.toml's, which a test keeps equal to it)."""

__version__ = "0.1.0.dev0"
