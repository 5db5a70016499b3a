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
"""Atomic file writes: the old file or the new one, never a torn one, and no temp left over."""

import os

import pytest
from rog_ros import atomic


def test_write_replaces_the_file_and_leaves_nothing_else(tmp_path):
    path = tmp_path / 'summary.json'
    path.write_text('old')
    atomic.atomic_write_text(path, 'new \u00e9')
    assert path.read_text(encoding='utf-8') == 'new \u00e9'
    assert os.listdir(tmp_path) == ['summary.json']


def test_a_write_that_fails_keeps_the_old_file_and_removes_its_temp(tmp_path, monkeypatch):
    path = tmp_path / 'summary.json'
    path.write_text('old')

    def _fail(fd):
        raise OSError(28, 'No space left on device')

    monkeypatch.setattr(atomic.os, 'fsync', _fail)
    with pytest.raises(OSError, match='No space left'):
        atomic.atomic_write_bytes(path, b'new')
    assert path.read_text() == 'old' and os.listdir(tmp_path) == ['summary.json']


def test_a_missing_folder_is_named_by_the_path_asked_for(tmp_path):
    path = tmp_path / 'no' / 'such' / 'trace.csv'
    with pytest.raises(FileNotFoundError) as info:
        atomic.atomic_write_text(path, 'x')
    assert info.value.filename == str(path) and '.tmp-' not in str(info.value)
