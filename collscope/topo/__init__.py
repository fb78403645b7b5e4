"""Topology discovery: parsers for captured tool outputs, the networkx model, clusters and drawings."""
