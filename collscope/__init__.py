"""collscope: what is my GPU topology, how fast are my collectives, which NCCL settings should I use."""

__version__ = "0.1.0"
