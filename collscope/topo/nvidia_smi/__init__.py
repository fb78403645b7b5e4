"""collscope.topo.nvidia_smi.queries."""
