"""collscope.analysis.recommend.core."""
