"""collscope.topo.infiniband.host."""
