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
"""Synchronisation systems as policies of one engine pair: ``make_policy('rog:4')``."""

from __future__ import annotations

from dataclasses import fields

from rog_ros.protocol.policies.base import layout_for, SyncPolicy
from rog_ros.protocol.policies.bsp import bsp
from rog_ros.protocol.policies.flown import flown
from rog_ros.protocol.policies.rog import rog
from rog_ros.protocol.policies.ssp import ssp

FACTORIES = {'bsp': bsp, 'ssp': ssp, 'rog': rog, 'flown': flown}

SYSTEM_TAGS = {'no-outage': {'outage_aware': False},
               'no-momentum-compensation': {'momentum_compensation': False},
               'tensor-scales': {'codec': 'defsgdm-tensor', 'chunk_scales': False}}
"""Policy overrides named by a system's ``#tag`` (``rog compare --systems rog:4#no-outage``
runs rog:4 with outage-aware RSP off, reported as its own system; ``#no-momentum-compensation``
keeps the workload's momentum on a stale system; ``#tensor-scales`` uses the artifact's codec,
one DEFSGDM scale per tensor). A tag ``field=value`` sets one numeric or boolean policy field
(``rog:4#deadline_floor=0.5``, ``rog:4#mta_override=1`` to send every row; dashes read as
underscores); several tags chain with ``#``."""

_TUNABLE = {f.name: f.type for f in fields(SyncPolicy)
            if f.type in ('float', 'int', 'bool', 'float | None') and f.name != 'staleness'}


def _tag_overrides(tags: str) -> dict:
    """Return the policy overrides that a ``#``-separated tag list names (labels add none)."""
    out = {}
    for tag in (t.strip() for t in tags.split('#')):
        if '=' not in tag:
            out.update(SYSTEM_TAGS.get(tag, {}))
            continue
        key, _, text = tag.partition('=')
        key = key.strip().replace('-', '_')
        kind = _TUNABLE.get(key)
        if kind is None:
            raise ValueError(f'unknown policy field {key!r} in tag {tag!r}; tunable: '
                             f'{", ".join(sorted(_TUNABLE))}')
        try:
            if kind == 'bool':
                if text.strip().lower() not in ('true', 'false', '1', '0'):
                    raise ValueError(text)
                out[key] = text.strip().lower() in ('true', '1')
            elif kind == 'float | None' and text.strip().lower() == 'none':
                out[key] = None             # the field's "not set" (mta_override=none)
            else:
                out[key] = (float if kind == 'float' else int)(text)
        except ValueError:
            raise ValueError(f'bad value {text!r} for {key} ({kind}) in tag {tag!r}') from None
    return out


def make_policy(spec: str, **overrides) -> SyncPolicy:
    """
    Parse ``'name'`` or ``'name:S'`` (e.g. ``'bsp'``, ``'ssp:4'``, ``'rog:20'``).

    A ``'#tag'`` suffix is a label; a tag in ``SYSTEM_TAGS`` also applies its overrides, and
    a ``'#field=value'`` tag sets that policy field (explicit ``overrides`` win).
    """
    spec, _, tag = spec.partition('#')
    overrides = {**_tag_overrides(tag), **overrides}
    name, colon, s = spec.partition(':')
    name = name.strip().lower()
    if name not in FACTORIES:
        raise ValueError(f'unknown sync system {spec!r}; choose one of {sorted(FACTORIES)} '
                         "(with ':S' for a staleness threshold, e.g. rog:4)")
    kwargs = dict(overrides)
    if colon and not s.strip():
        raise ValueError(f"no staleness after ':' in {spec!r}; give one (e.g. {name}:4) or "
                         "leave out the ':'")
    if s:
        try:
            kwargs['staleness'] = int(s)
        except ValueError:
            raise ValueError(f'bad staleness in {spec!r}: {s!r} is not an integer') from None
    return FACTORIES[name](**kwargs)


__all__ = ['SYSTEM_TAGS', 'SyncPolicy', 'layout_for', 'make_policy', 'bsp', 'ssp', 'rog', 'flown']
