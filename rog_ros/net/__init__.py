# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
"""
Network emulation: bandwidth traces, fluid link models, throughput estimators, shaping.

A leaf package (numpy only): ``traces`` (Trace, files, presets, statistics), ``links``
(FluidLink, SharedMedium), ``estimator`` (ThroughputEstimator, LaggedRateOracle), ``shaper``
(TokenBucketShaper) and ``cli_trace`` (the ``rog trace`` command).
"""

from rog_ros.net.estimator import LaggedRateOracle, ThroughputEstimator
from rog_ros.net.links import FluidLink, SharedMedium
from rog_ros.net.shaper import TokenBucketShaper
from rog_ros.net.traces import (check, generate, load_trace, PRESETS, save_trace, stats,
                                TARGETS, Trace, TraceFormatError)

__all__ = [
    'check', 'FluidLink', 'generate', 'LaggedRateOracle', 'load_trace', 'PRESETS', 'save_trace',
    'SharedMedium', 'stats', 'TARGETS', 'ThroughputEstimator', 'TokenBucketShaper', 'Trace',
    'TraceFormatError',
]
