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
Whether a ``torch.save`` archive on disk is whole: its zip entries' checksums, read without torch.

``torch.load`` does not check the CRC-32 the archive holds for every entry, so a state or model
file with a flipped bit (a worn SD card) loaded as valid. The nodes' state files and the model
files rog_ros writes are checked here before they are loaded; this module needs only
``zipfile``, so the workloads (which load starting models) and the nodes share it.
"""

from __future__ import annotations

import zipfile


def damage(path) -> str:
    """
    Say what is wrong with the state file at ``path`` ('' when its archive is whole).

    ``torch.save`` writes a zip archive with a CRC-32 of every entry, but ``torch.load``
    does not check them: a state file with a flipped bit in a tensor (a worn SD card) loaded
    without a word and the run went on from wrong numbers. This reads every entry and checks
    its checksum (a few milliseconds for a worker's state, once per start).
    """
    try:
        with zipfile.ZipFile(path) as archive:
            broken = archive.testzip()
    except Exception as err:  # noqa: B902 - any damage (zipfile raises many kinds): one line
        first = (str(err).strip().splitlines() or [''])[0][:120]
        return f'{type(err).__name__}: {first}'
    return f'{broken} fails its checksum' if broken is not None else ''


def model_damage(path) -> str:
    """
    Say what is wrong with the model file at ``path`` ('' when whole or when it cannot say).

    A model file rog_ros wrote (a fleet's ``model.pt``, a robot's ``model_out``) carries its
    archive's checksums (``durable.checksums_written``), checked here as a state file's are:
    ``torch.load`` alone loaded one with a flipped bit as valid. A user's own file may carry
    none and is not refused for it: one in torch's older format (not a zip archive), or
    written with its checksums turned off (``torch.serialization.set_crc32_options(False)``
    writes 0 in every entry's CRC-32). An archive carries checksums when an entry holding
    data has a CRC-32 other than 0: every ``torch.save`` archive has several such entries
    (``version``, ``byteorder``, ``data.pkl``), so one flipped bit cannot make a file with
    checksums look like one without; and a CRC-32 of 0 for a whole file's entries by chance
    (2^-32 each) does not happen.
    """
    try:
        if not zipfile.is_zipfile(path):
            return ''                   # (torch.load says what a file it cannot read is)
        with zipfile.ZipFile(path) as archive:
            if not any(info.CRC for info in archive.infolist() if info.file_size):
                return ''
    except Exception:  # noqa: B902 - damage says what is wrong with it
        pass
    return damage(path)
