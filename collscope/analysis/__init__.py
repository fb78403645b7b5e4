"""Analysis: cost models (alpha-beta and NCCL's own), fits, comparisons, recommendations and reports."""
