# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
"""Shared pytest set-up: deterministic torch, small thread pool (CI has 2 cores)."""

import torch

torch.set_num_threads(1)   # small tensors: one thread is faster and stable under load
torch.manual_seed(0)
