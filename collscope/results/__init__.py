"""collscope.results."""
