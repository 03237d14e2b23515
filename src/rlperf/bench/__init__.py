"""Benchmark registry and the SPS regression gate."""
