# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
"""rog_ros: a team of robots fine-tunes one shared PyTorch model over unstable Wi-Fi.

Layers (dependencies point downward only): ``core`` (pure tensor algorithms) <- ``protocol``
(sans-I/O engines) <- ``sim`` | ``nodes``; ``net``, ``transport`` and ``workloads`` are leaves.
"""

__version__ = '0.1.0'
