# Copyright 2026 rog_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""
Assembly: turn node parameters into the objects a node wires together.

Every node of a fleet must build *the same* layout, codec, policy and starting weights from
the same parameters, or rows would mean different things on different robots; this module is
the one place that does it (workload -> model -> RowLayout -> flat w0). The emulated link of
each worker (trace + time offset -> token bucket on the node's monotonic clock) is
``nodes.emulated_link``'s, re-exported here for the training nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
import importlib

from rog_ros.core.compress import make_codec
from rog_ros.nodes.emulated_link import (  # noqa: F401 - re-exported for the training nodes
    EmulatedLink, epoch_to_monotonic, link_for, PRESET_DURATION_S, shaper_for)
from rog_ros.nodes.params import DEFAULT_DEADLINE_FLOOR, policy_spec
from rog_ros.nodes.settings import FREE_STRAGGLERS_DEFAULT
from rog_ros.protocol.policies import layout_for, make_policy
from rog_ros.protocol.policies.base import DEFAULT_OUTAGE_BOUND, DEFAULT_RTT_FLOOR
from rog_ros.workloads import start_model
import torch


BUILDERS = {'toy': ('rog_ros.workloads.toy', 'make_toy'),
            'mpcol': ('rog_ros.workloads.mpcol', 'make_mpcol'),
            'eacol': ('rog_ros.workloads.eacol', 'make_eacol')}
"""Fallback when ``rog_ros.workloads`` has no registry (``get``) yet."""


def load_workload(name: str, options=None):
    """
    Return ``rog_ros.workloads.get(name, **options)``, or the known builder of ``name``.

    ``options``: the setting ``workload_options`` as text (``'data_dir=/data;hidden=128'``,
    parsed and checked against the builder: ValueError, one line) or as a dict already
    checked (:func:`workload_options`); None or '' for the builder's defaults.
    """
    from rog_ros import workloads
    kwargs = workload_options(name, options) if isinstance(options, str) else (options or {})
    get = getattr(workloads, 'get', None)
    if get is not None:
        return get(name, **kwargs)
    if name not in BUILDERS:
        raise ValueError(f'unknown workload {name!r}; known: {", ".join(BUILDERS)}')
    module, builder = BUILDERS[name]
    return getattr(importlib.import_module(module), builder)(**kwargs)


def workload_options(name: str, text) -> dict:
    """Return the options of a ``workload_options`` text for workload ``name`` (ValueError)."""
    from rog_ros.workloads.options import from_text
    return from_text(name, text)


@dataclass
class Training:
    """What server and workers share: workload, model, policy, layout, codec, w0."""

    workload: object
    model: torch.nn.Module
    policy: object
    layout: object
    codec: object
    w0: torch.Tensor
    lr: float
    start: str = ''          # where the starting weights come from (init_model or checkpoint)
    fingerprint: str = ''    # of the starting weights: equal on every node of a fleet
    options: dict = None     # the workload's builder options (setting workload_options)

    def start_line(self) -> str:
        """Return the log line naming the starting weights (compare it across robots)."""
        return f'starting model: {self.start} (fingerprint {self.fingerprint})'


def build_training(args) -> Training:
    """Build the shared training objects from fleet parameters (deterministic)."""
    from rog_ros.nodes import push_systems
    options = workload_options(args.workload, getattr(args, 'workload_options', None))
    workload = load_workload(args.workload, options)
    if getattr(args, 'init_model', None):
        workload = workload.starting_from(args.init_model)
    model = workload.make_model()
    start = {'start': workload.describe_start(), 'fingerprint': start_model.fingerprint(model),
             'options': options}
    lr = args.lr if args.lr is not None else workload.lr
    if push_systems.is_push(getattr(args, 'sync', 'rog')):   # AdaComp, GSP: flat, no policy
        layout = push_systems.layout([tuple(p.shape) for p in model.parameters()])
        w0 = layout.flatten([p.detach() for p in model.parameters()]).clone()
        return Training(workload, model, push_systems.NoPolicy(), layout, None, w0, float(lr),
                        **start)
    push_systems.check(vars(args))
    overrides = {'deadline_floor': getattr(args, 'deadline_floor', DEFAULT_DEADLINE_FLOOR),
                 'rtt_floor': getattr(args, 'rtt_floor', DEFAULT_RTT_FLOOR)}
    if getattr(args, 'sync', 'rog') == 'rog':      # the others never suspend for a dead link
        overrides['outage_aware'] = bool(getattr(args, 'outage_aware', True))
        overrides['readmit_backoff'] = bool(getattr(args, 'readmit_backoff', True))
        overrides['straggler_slack'] = bool(getattr(args, 'straggler_slack', True))
        overrides['async_when_out'] = bool(getattr(args, 'async_when_out', False))
        overrides['free_stragglers'] = bool(getattr(args, 'free_stragglers',
                                                    FREE_STRAGGLERS_DEFAULT))
        overrides['outage_bound'] = float(getattr(args, 'outage_bound', DEFAULT_OUTAGE_BOUND))
        overrides['late_rows'] = bool(getattr(args, 'late_rows', True))   # nor withhold rows
        overrides['late_pulls'] = bool(getattr(args, 'late_pulls', True))
    policy = make_policy(policy_spec(args), **overrides)
    params = list(model.parameters())
    layout = layout_for(policy, [tuple(p.shape) for p in params])
    w0 = layout.flatten([p.detach() for p in params]).clone()
    return Training(workload, model, policy, layout, make_codec(policy.codec), w0, float(lr),
                    **start)
