"""Benchmarks: the paper's POMDP generator (V-A), the timing harness, reports and plots.

Commands: ``bayes-infer generate`` (generator), ``bayes-infer bench`` (harness), ``bayes-infer report`` (report),
``bayes-infer bench-variants`` (variants_benchmark: every variant vs pymdp on a dozen models).
"""
