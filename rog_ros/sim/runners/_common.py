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
What the reference systems' runners share with ``simulate``: links, harness, evaluation, tags.

Each runner gets the same per-robot trace-driven links as :func:`rog_ros.sim.simulator.simulate`
(one ``FluidLink`` per robot, its two directions sharing the airtime by default), drives its
engines in one :class:`~rog_ros.sim.harness.Harness` with periodic and final evaluations,
computes real gradients of the workload's model on the worker's own partition, and evaluates a
flat model vector on the workload's held-out set. The ``#field=value`` tags of a system spec
set the runner's options (:func:`tag_overrides`), as ``rog:4#field=value`` sets a field of
Rog's policy.
"""

from __future__ import annotations

import dataclasses

from rog_ros.core.rows import RowLayout
from rog_ros.net import links
from rog_ros.sim.harness import Harness
import torch

_TAG_TYPES = {'float': float, 'int': int, 'bool': bool, 'str': str}


def parse_arg(system: str):
    """``'adacomp:0.1#tag'`` -> ('adacomp', '0.1'); the argument is '' when absent."""
    name, _, arg = system.split('#')[0].partition(':')
    return name.strip().lower(), arg.strip()


def field_kinds(config_class, leave_out=()) -> dict:
    """
    Return ``{field: type}`` of a config dataclass's fields that a ``#field=value`` tag can set.

    A type is the field's annotation as text (``'float'``, ``'int | None'``); fields of other
    types (tuples, lists: a comma would split ``rog compare --systems``) and ``leave_out`` are
    left out.
    """
    out = {}
    for f in dataclasses.fields(config_class):
        kind = f.type if isinstance(f.type, str) else getattr(f.type, '__name__', str(f.type))
        if f.name not in leave_out and kind.replace(' | None', '') in _TAG_TYPES:
            out[f.name] = kind
    return out


def tag_overrides(system: str, kinds: dict) -> dict:
    """
    Return the options that the ``#field=value`` tags of a system spec set.

    ``kinds`` maps every option a tag may set to its type (``'float'``, ``'int'``, ``'bool'``,
    ``'str'``, each also with ``' | None'``, where ``none`` is None). Dashes in a field name
    read as underscores, as in Rog's tags (``rog_ros.protocol.policies``). A tag without
    ``=`` is a label (``gsp#baseline-run``) and sets nothing, but one of Rog's engine tags
    (``#no-outage``) is refused: it means nothing to a reference system. ValueError names an
    unknown field (listing the valid ones) or a bad value in one line.
    """
    from rog_ros.protocol.policies import SYSTEM_TAGS
    name = parse_arg(system)[0]
    out = {}
    for tag in (t.strip() for t in system.split('#')[1:]):
        if '=' not in tag:
            if tag in SYSTEM_TAGS:
                raise ValueError(f"{name}: #{tag} is a tag of Rog's engine (bsp, ssp, rog, "
                                 f'flown); {name} runs on its own engine')
            continue
        key, _, text = tag.partition('=')
        key, text = key.strip().replace('-', '_'), text.strip()
        kind = kinds.get(key)
        if kind is None:
            raise ValueError(f'{name}: unknown option {key!r} in tag #{tag}; a tag of {name} '
                             f'sets one of {", ".join(sorted(kinds))}')
        base = kind.replace(' | None', '')
        try:
            if kind != base and text.lower() == 'none':
                out[key] = None
            elif base == 'bool':
                if text.lower() not in ('true', 'false', '1', '0'):
                    raise ValueError(text)
                out[key] = text.lower() in ('true', '1')
            elif base == 'str':
                out[key] = text
            else:
                out[key] = _TAG_TYPES[base](text)
        except ValueError:
            raise ValueError(f'{name}: bad value {text!r} for {key} ({kind}) in tag '
                             f'#{tag}') from None
    return out


def with_tags(system: str, overrides: dict, kinds: dict) -> dict:
    """Return ``overrides`` over the options that ``system``'s tags set (explicit ones win)."""
    return {**tag_overrides(system, kinds), **dict(overrides or {})}


def workload_of(cfg):
    """
    Return ``(workload, n, iterations)`` of a run configuration, checking ``n >= 1``.

    ``iterations`` is the per-worker budget: ``cfg.iterations``, else the workload's
    ``adaptation_iterations``, else ``simulate``'s default. The runners train the workload's
    defaults: ``cfg.workload_options`` (an EACOL ``--model``) raise ValueError rather than
    be dropped while the summary records them.
    """
    from rog_ros.sim.simulator import config_workload, DEFAULT_ITERATIONS
    refuse_workload_options(cfg)
    wl = config_workload(cfg, options=False)
    if cfg.workers < 1:
        raise ValueError('need at least one worker')
    iterations = cfg.iterations or getattr(wl, 'adaptation_iterations', DEFAULT_ITERATIONS)
    return wl, cfg.workers, iterations


def refuse_workload_options(cfg) -> None:
    """Raise ValueError if ``cfg`` asks a reference system for workload options it ignores."""
    if cfg.workload_options:
        raise ValueError(f"{parse_arg(cfg.system)[0]} trains the workload's defaults; it does "
                         f'not take workload options ({dict(cfg.workload_options)})')


def build_links(cfg, n: int):
    """Per-robot up/down links exactly as ``simulate`` builds them."""
    from rog_ros.sim.simulator import make_traces
    link_list = [links.FluidLink(trace, latency_s=cfg.latency_s, seed=cfg.seed + r,
                                 time_offset_s=offset)
                 for r, (trace, offset) in enumerate(make_traces(cfg.trace, n, cfg.seed))]
    if cfg.duplex == 'shared':
        stations = [links.DuplexLink(ln) for ln in link_list]
        return [st.up for st in stations], [st.down for st in stations]
    return link_list, link_list


def make_harness(cfg, server, workers, grad_fn, compute_s, recorder, evaluate, iterations: int,
                 progress=None) -> Harness:
    """
    Build the Harness of one runner's engines over :func:`build_links`, evaluated as ``simulate``.

    ``evaluate(max_samples) -> dict`` scores the current model; the harness calls it about
    ``cfg.evaluations`` times over ``iterations`` mean iterations per worker and hands each
    result to ``progress(now, mean_iteration, metrics)`` when given. Run it with
    ``harness.run(...)``, then record the final evaluation with :func:`final_eval`.
    """
    n = len(workers)
    harness = None

    def eval_fn(max_samples=cfg.eval_samples):
        out = evaluate(max_samples)
        if progress is not None:
            progress(harness.now, sum(harness.stats.iterations) / n, out)
        return out

    up, down = build_links(cfg, n)
    harness = Harness(server, workers, grad_fn, compute_s=compute_s, up=up, down=down,
                      recorder=recorder, eval_fn=eval_fn,
                      eval_every_iterations=max(1.0, iterations / max(cfg.evaluations, 1)))
    return harness


def final_eval(harness: Harness, cfg) -> None:
    """Record the final evaluation (``cfg.final_eval_samples``) and the end time of a run."""
    harness.recorder.on_eval(harness.now, sum(harness.stats.iterations) / len(harness.workers),
                             harness.eval_fn(cfg.final_eval_samples))
    harness.recorder.end_time_s = harness.now


class ModelBench:
    """
    One model of the workload bound to a flat vector: gradients and evaluation of any vector.

    A single module serves every worker (its parameters are overwritten with the worker's
    model before each pass), so 200 simulated workers cost one model, not 200.
    """

    def __init__(self, wl, n_workers: int, seed: int):
        self.wl = wl
        self.model = wl.make_model()
        self.shapes = [tuple(p.shape) for p in self.model.parameters()]
        self.sizes = [int(p.numel()) for p in self.model.parameters()]
        self.layout = RowLayout(self.shapes, whole_model=True)
        self.w0 = self.layout.flatten([p.detach() for p in self.model.parameters()]).clone()
        self.flat = self.w0.clone()
        self.layout.bind(self.model, self.flat)
        self.batches = [wl.worker_batches(r, n_workers, seed) for r in range(n_workers)]

    def grad(self, rank: int, w: torch.Tensor) -> torch.Tensor:
        """Gradient of worker ``rank``'s next batch at model ``w`` (flat, model order)."""
        self.flat.copy_(w)
        self.model.train()
        self.model.zero_grad(set_to_none=False)
        loss = self.wl.loss(self.model, next(self.batches[rank]))
        loss.backward()
        return self.layout.flatten([p.grad if p.grad is not None else torch.zeros_like(p)
                                    for p in self.model.parameters()])

    def evaluate(self, w: torch.Tensor, max_samples=None) -> dict:
        """Accuracy and loss of model ``w`` on the workload's held-out set."""
        self.flat.copy_(w)
        with torch.no_grad():
            return self.wl.evaluate(self.model, max_samples=max_samples)
