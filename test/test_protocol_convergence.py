# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
"""4 workers on a convex problem reach the same loss under bsp, ssp:4 and rog:4 (2%)."""

import pytest
import torch

from protocol_fixtures import build
from rog_ros.core.rows import RowLayout
from rog_ros.sim.harness import quadratic_problem
from protocol_fixtures import SHAPES


def _optimum():
    return quadratic_problem(4, RowLayout(SHAPES, whole_model=True), seed=0)[1]


def final_loss(spec):
    harness, server, workers, loss_fn, _ = build(spec, n=4, iters=60, lr=0.1, noise=0.05,
                                                 momentum=0.0, weight_decay=0.0,
                                                 chunk_bytes=1024)
    harness.run()
    return loss_fn(server.consensus_model()), harness


def test_same_loss_under_all_systems():
    losses = {s: final_loss(s)[0] for s in ('bsp', 'ssp:4', 'rog:4')}
    _, server, _, loss_fn, _ = build('bsp')
    start = loss_fn(server.w_srv)
    floor = loss_fn(server.w_srv * 0 + _optimum())
    for s, value in losses.items():
        # it really converged: < 3% of the initial excess loss is left
        assert value - floor < 0.03 * (start - floor), (s, value, start, floor)
    ref = losses['bsp']
    for s in ('ssp:4', 'rog:4'):
        assert losses[s] == pytest.approx(ref, rel=0.02), losses
