"""The version of collscope, in a module of its own so that any layer can name it without importing the root package."""

__version__ = "0.1.0"
