"""collscope.analysis.nccl_model.model."""
