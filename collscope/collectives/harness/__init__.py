"""collscope.collectives.harness."""
