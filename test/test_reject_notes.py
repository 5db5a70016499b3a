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
"""A node says why its engine dropped a message: once per kind, bounded against floods."""

from rog_ros.nodes.reject_notes import RejectNotes
from rog_ros.protocol.actions import Log


class Said:

    def __init__(self):
        self.lines = []

    def warning(self, text):
        self.lines.append(text)


def reject(error, worker=-1):
    return Log('reject', 1.0, worker, {'error': error})


def test_first_reject_of_each_kind_is_said_with_its_sender():
    said, notes = Said(), RejectNotes()
    notes.on_log(reject('RowVersions for transfer 12, which is not expected'), said)
    notes.on_log(reject('RowVersions for transfer 13, which is not expected'), said)   # same
    notes.on_log(reject('message from unknown worker 7', worker=7), said)
    notes.on_log(Log('push_done', 1.0, 0, {}), said)                     # not a reject
    assert said.lines == [
        'dropped a message (from the server, first of its kind): RowVersions for transfer 12, '
        'which is not expected',
        'dropped a message (from robot 7, first of its kind): message from unknown worker 7']


def test_a_flood_of_kinds_is_capped_with_one_line():
    said, notes = Said(), RejectNotes(limit=3)
    for k in range(50):
        notes.on_log(reject(f'kind {chr(65 + k % 26)}{chr(65 + k // 26)}'), said)
    assert len(said.lines) == 4
    assert said.lines[-1].startswith('more kinds of message dropped than the 3 named above')


def test_a_reject_without_an_error_text_is_still_said():
    said, notes = Said(), RejectNotes()
    notes.on_log(Log('reject', 1.0, 2, {}), said)
    assert said.lines == ['dropped a message (from robot 2, first of its kind): no reason given']
