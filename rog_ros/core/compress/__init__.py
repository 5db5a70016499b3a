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
"""Row codecs: DEFSGDM scaled sign per tensor row (the default) or per tensor, Identity (fp32)."""

from __future__ import annotations

from rog_ros.core.compress.base import RowCodec
from rog_ros.core.compress.defsgdm import MomentumPreconditioner
from rog_ros.core.compress.framing import frame, unframe
from rog_ros.core.compress.identity import Identity
from rog_ros.core.compress.row_sign import RowScaledSign
from rog_ros.core.compress.scaled_sign import ScaledSign

CODECS = {c.codec_id: c for c in (Identity, ScaledSign, RowScaledSign)}
NAMES = {'identity': Identity, 'scaled_sign': ScaledSign, 'row_sign': RowScaledSign,
         'defsgdm': RowScaledSign, 'defsgdm-tensor': ScaledSign}
"""'defsgdm' (the default of every engine system) blocks by tensor row; 'defsgdm-tensor' is
the artifact's one block per tensor."""


def make_codec(name: str, dtype=None) -> RowCodec:
    """Codec by name ('defsgdm' = 'row_sign', 'defsgdm-tensor' = 'scaled_sign', 'identity')."""
    try:
        cls = NAMES[name]
        return cls(dtype) if (cls is Identity and dtype is not None) else cls()
    except KeyError:
        raise ValueError(f'unknown codec {name!r}; choose one of {sorted(NAMES)}') from None


__all__ = ['RowCodec', 'ScaledSign', 'RowScaledSign', 'Identity', 'MomentumPreconditioner',
           'frame', 'unframe', 'make_codec', 'CODECS']
