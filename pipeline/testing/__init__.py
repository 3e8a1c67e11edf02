"""Offline fixtures shared by the tests, the demo and the benchmarks: tiny models and sample records."""
