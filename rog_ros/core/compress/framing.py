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
Optional zstd framing of chunk payloads: one marker byte, then raw or zstd bytes.

Packed sign bits are close to incompressible, fp32 rows and sparse updates are not, so a frame
is only compressed when that makes it smaller. The marker makes frames self-describing.
"""

from __future__ import annotations

RAW = 0
ZSTD = 1


def frame(data: bytes, level: int | None = 3) -> bytes:
    """Frame ``data``; ``level=None`` never compresses."""
    if level is not None and len(data) > 64:
        import zstandard
        packed = zstandard.ZstdCompressor(level=level).compress(data)
        if len(packed) < len(data):
            return bytes([ZSTD]) + packed
    return bytes([RAW]) + data


def unframe(data: bytes, max_size: int = 1 << 26) -> bytes:
    """Inverse of ``frame``; raises ValueError on an unknown marker or oversize output."""
    if not data:
        raise ValueError('empty frame')
    if data[0] == RAW:
        return data[1:]
    if data[0] == ZSTD:
        import zstandard
        return zstandard.ZstdDecompressor().decompress(data[1:], max_output_size=max_size)
    raise ValueError(f'unknown frame marker {data[0]}')
