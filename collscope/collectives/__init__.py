"""Measuring collectives: one Measurement record for nccl-tests, torch.distributed and mpi4py."""
