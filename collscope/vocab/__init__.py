"""collscope.vocab."""
