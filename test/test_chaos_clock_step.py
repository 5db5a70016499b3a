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
``rog chaos --scenario link-outage`` judges its outage window on the monotonic clock.

The nodes read the fleet's wall-clock ``epoch`` onto their monotonic clocks once, at their
start; a step of the wall clock (NTP) after that moves wall-clock ledger stamps against the
nodes' trace time. Here the wall clock steps back an hour inside the outage, and the scenario
must still see the victim's iterations before and after it where they were.
"""

from pathlib import Path
import types

import chaos_fakes
from rog_ros.experiments import chaos_fleet, chaos_link_outage
from rog_ros.experiments.chaos_fleet import ChaosConfig
from rog_ros.experiments.chaos_fleet_scenario import VICTIM
from rog_ros.nodes import chaos_hooks

STEP_S = -3600.0
"""The wall clock's step (NTP setting it an hour back)."""


class _SteppedClock:
    """A ``time`` module whose wall clock steps by ``STEP_S`` at monotonic ``step_at``."""

    def __init__(self, step_at: float):
        """Start both clocks at 1000 s (wall: a 2026 date) with the step ahead."""
        self.mono, self.step_at = 1000.0, step_at

    def monotonic(self) -> float:
        """Return the monotonic clock (advanced only by ``sleep``)."""
        return self.mono

    def time(self) -> float:
        """Return the wall clock: the monotonic one shifted, stepped once past ``step_at``."""
        return 1.79e9 + self.mono + (STEP_S if self.mono >= self.step_at else 0.0)

    def sleep(self, seconds: float) -> None:
        """Advance the clocks instead of sleeping."""
        self.mono += seconds


def _write_ledgers(ledger_dir: Path, clock: _SteppedClock, epoch: float, workers: int,
                   victim_at, others_at) -> None:
    """Write ``computed`` records as the nodes do, each stamped at its trace time."""
    ledgers = {r: chaos_hooks._Ledger(str(ledger_dir / f'worker_{r}.jsonl'), 1)
               for r in range(workers)}
    events = sorted([(t, VICTIM) for t in victim_at]
                    + [(t, r) for t in others_at for r in range(workers) if r != VICTIM])
    for n, (t, rank) in enumerate(events):
        clock.mono = epoch + t
        ledgers[rank].add('computed', clock=n)
        ledgers[rank].flush()
    for ledger in ledgers.values():
        ledger.close()


def test_a_wall_clock_step_during_the_outage_does_not_move_it(tmp_path, monkeypatch):
    """Check that a run whose wall clock stepped an hour back mid-outage is judged as it ran."""
    start_s, outage_s, workers = 8.0, 6.0, 2
    clock = _SteppedClock(step_at=1000.0 + start_s + 2.0)
    for module in (chaos_hooks, chaos_fleet, chaos_link_outage):
        monkeypatch.setattr(module, 'time', clock)
    epoch_wall, epoch_mono = clock.time(), clock.monotonic()
    ledger_dir = tmp_path / 'ledger'
    ledger_dir.mkdir()
    # the victim trains before the outage and again after it; the others throughout
    _write_ledgers(ledger_dir, clock, epoch_mono, workers,
                   victim_at=[1.0 + i for i in range(7)] + [15.0, 16.0, 17.0],
                   others_at=[1.0 + 0.5 * i for i in range(40)])
    fleet = types.SimpleNamespace(
        ledger_dir=str(ledger_dir), epoch_mono=epoch_mono, codes=lambda: {}, push=False,
        specs={'rog_server': types.SimpleNamespace(parameters={
            'epoch': epoch_wall, 'staleness': 4, 'sync': 'rog', 'outage_aware': True})})

    monkeypatch.setattr(chaos_link_outage, 'fleet_scenario', chaos_fakes.run_on(fleet))
    seen = {}
    cfg = ChaosConfig(out=str(tmp_path), workers=workers, outage_s=outage_s)
    res = chaos_link_outage._link_outage_from(cfg, {'start_s': start_s, 'iterations': 100},
                                              seen)
    assert res['problems'] == []
    assert res['victim_iterations'] == {'before': 7, 'during': 0, 'after': 3}
    assert res['recover_s'] == 1.0
    assert abs(seen['training_s'] - 1.0) < 1e-3 and abs(seen['period_s'] - 0.5) < 1e-3
