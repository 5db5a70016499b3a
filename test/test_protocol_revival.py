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
"""RevivalWatch: a retired run is taken back only once it keeps speaking for two poke intervals."""

from rog_ros.protocol.revival import (
    DuplicateRanks, POKE_END_TIMEOUTS, RevivalWatch, REVIVE_AFTER_POKES)

END_TIMEOUT = 0.5
SPAN = REVIVE_AFTER_POKES * POKE_END_TIMEOUTS * END_TIMEOUT   # 4 s


def test_a_dead_runs_burst_of_late_copies_never_revives_it():
    # many copies, all within a network delay of the death: never enough time
    watch = RevivalWatch()
    assert not any(watch.alive('dead', 10.0 + 0.01 * i, END_TIMEOUT) for i in range(50))


def test_a_live_run_poking_once_per_interval_is_revived_after_two_intervals():
    watch = RevivalWatch()
    poke = POKE_END_TIMEOUTS * END_TIMEOUT
    answers = [watch.alive('live', 3.0 + poke * i, END_TIMEOUT) for i in range(4)]
    # pokes at 0, 1, 2 intervals: the third is at the span but only the third message
    assert answers == [False, False, True, False]
    # revived: the count started over, so a retirement afterwards needs two intervals again
    assert not watch.alive('live', 3.0 + poke * 4, END_TIMEOUT)


def test_two_messages_spread_over_the_span_are_not_enough():
    # time alone does not revive: a dead run's one late copy plus one much later straggler
    watch = RevivalWatch()
    assert not watch.alive('run', 0.0, END_TIMEOUT)
    assert not watch.alive('run', 100.0, END_TIMEOUT)
    assert watch.alive('run', 100.0, END_TIMEOUT)


def test_keep_forgets_runs_that_are_no_longer_retired():
    watch = RevivalWatch()
    for t in (0.0, 1.0, 2.0):
        watch.alive('a', t, END_TIMEOUT)
        watch.alive('b', t, END_TIMEOUT)
    watch.keep(lambda k: k == 'b')
    # 'b' keeps its history and is revived at the span; 'a' starts over and is not
    assert watch.alive('b', SPAN, END_TIMEOUT)
    assert not watch.alive('a', SPAN, END_TIMEOUT)


def test_duplicate_ranks_names_a_rank_once_at_its_second_take_back():
    # Rog's server and the push systems' transfers ask one DuplicateRanks (they had the
    # same ping-pong check written twice): a robot that restarted is revived once and never
    # named; two processes of rank 3 (runs 7 and 8) are named at the second take-back only
    dup = DuplicateRanks()
    assert dup.revived(1, 5, 6) == [] and dup.revived(1, 5, 9) == [] and dup.ranks == set()
    assert dup.revived(3, 7, 8) == []
    said = dup.revived(3, 8, 7)
    assert [(log.name, log.worker, log.info['runs']) for log in said] == [
        ('duplicate_rank', 3, [7, 8])]
    assert dup.revived(3, 7, 8) == [] and dup.ranks == {3}
