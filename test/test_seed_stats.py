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
"""Statistics over seeds: a value a run does not record is shown as missing, not as a miss."""

from rog_ros.experiments.report_table import marks_legend, table_markdown
from rog_ros.experiments.seed_stats import aggregate

COLUMN = 8
"""Index of the 's/iter to target' cell in a row of ``table_markdown`` (after the system)."""


def _cells(table: list, row: int = 0) -> list:
    """Return the cells of one row of the Markdown table of ``table``."""
    line = table_markdown(table).splitlines()[2 + row]
    return [c.strip() for c in line.strip('|').split('|')]


def _fleet_run(seed: int, time_to_target):
    """Return a fleet run's summary: it records no iterations to the target, no s/iteration."""
    return {'system': 'rog:4', 'seed': seed, 'time_to_target_s': time_to_target,
            'final_accuracy': 0.9, 's_per_iteration': 0.1, 'driver': 'fleet'}


def test_a_value_fleet_runs_do_not_record_is_missing_not_a_missed_target():
    # rog report on fleet runs showed '> [>->]' (and the legend of a missed target) in the
    # s/iter to target column although every run reached the target
    row = aggregate([_fleet_run(0, 2.0), _fleet_run(1, 3.0)])
    assert row['reached_target'] == '2/2'
    assert 's_per_iteration_to_target_median' not in row
    assert row['s_per_iteration_to_target'] is None
    cells = _cells([row])
    assert table_markdown([row]).splitlines()[0].split('|')[COLUMN + 1].strip() == (
        's/iter to target')
    assert cells[COLUMN] == '-'
    assert cells[1] == '2.5 [2.2-2.8]'            # the time to target is still told
    assert marks_legend([row]) == ''


def test_a_missed_target_is_still_marked_where_no_run_reached_it():
    row = aggregate([_fleet_run(0, None), _fleet_run(1, None)])
    assert row['reached_target'] == '0/2'
    assert _cells([row])[COLUMN] == '> [>->]'
    assert marks_legend([row]).startswith('`>` in a median [interquartile range] column')


def test_runs_that_record_the_value_keep_their_quartiles():
    runs = [dict(_fleet_run(k, t), iterations_to_target=10.0)
            for k, t in enumerate([1.0, 2.0, 3.0])]
    row = aggregate(runs)
    assert row['s_per_iteration_to_target_median'] == 0.2
    assert _cells([row])[COLUMN] == '0.200 [0.150-0.250]'


def test_a_key_no_run_has_is_missing_in_the_statistics():
    row = aggregate([{'system': 'bsp', 'seed': 0, 'time_to_target_s': 1.0}])
    assert row['final_accuracy'] is None
    assert 'final_accuracy_median' not in row and 'final_accuracy_p25' not in row
    assert row['time_to_target_s_median'] == 1.0
