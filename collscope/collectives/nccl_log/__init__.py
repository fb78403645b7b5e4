"""collscope.collectives.nccl_log.parse."""
