"""``collscope canary``: a go / no-go for a change (an NCCL, plugin, driver, image or setting), B against A.

Both sides run interleaved on the same nodes in the same allocation (ABBA blocks), each (op, size) of a workload
measured with the engines collscope already has; the verdict prices the change on the workload's own size mix
with a bootstrap confidence interval over blocks (:mod:`.verdict`), says why from what each side ran
(:mod:`.why`), and writes a results directory that ``analyze``, ``report`` and ``observe ingest`` read.
"""
