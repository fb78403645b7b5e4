# collscope recommend: environment settings chosen from measurements
# from sweep(s): sw-test; NCCL version(s): 2.27.5
# rule: a difference counts when both sides have >= 3 repeats and the median busbw differs by more than 3% and by more than the combined spread ((max-min)/median over repeats, both sides), at >= 2 adjacent measured sizes
# workload: one call per measured size (9 calls per step over the measured groups), so each size weighs by its own time; `collscope recommend --workload FILE` weighs the job's mix
# environment variables apply to every size: per op, the config that saves the most time on the workload and loses beyond noise at no size carrying more than 5% of its time
# all_reduce: NCCL_ALGO=Ring;NCCL_PROTO=Simple saves 3976 us per step (25.9%) on the workload (default: 15339 us per step)
# cost: all_reduce (8 ranks, 1 node) loses 12% at 8..4K (4 sizes) with NCCL_ALGO=Ring;NCCL_PROTO=Simple; 0.0638 us per step on the workload
# warning: forcing NCCL_ALGO/NCCL_PROTO disables a loaded NCCL tuner plugin's choices for the affected collectives; the per-size alternative is a tuner plugin rule file: collscope recommend --format tuner
export NCCL_ALGO=Ring  # all_reduce (8 ranks, 1 node) +35% busbw at 256K..128M (4 sizes, 3 repeats, noise <= 4%)
# NCCL_ALGO=Ring applies to every collective; to force it for all_reduce only (NCCL >= 2.24): NCCL_ALGO="allreduce:ring"
export NCCL_PROTO=Simple  # all_reduce (8 ranks, 1 node) +35% busbw at 256K..128M (4 sizes, 3 repeats, noise <= 4%)
# NCCL_PROTO=Simple applies to every collective; to force it for all_reduce only (NCCL >= 2.24): NCCL_PROTO="allreduce:simple"
