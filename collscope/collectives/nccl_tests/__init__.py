"""collscope.collectives.nccl_tests.run."""
