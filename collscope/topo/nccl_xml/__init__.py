"""collscope.topo.nccl_xml.parse."""
