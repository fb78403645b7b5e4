"""Sweeps: a grid of settings (NCCL and Open MPI knobs) x sizes, planned, launched and resumed."""
