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
"""The end of a run across a server crash: the nodes, over an in-memory bus."""

import time

import pytest

from test_push_fleet_restart import _durable_fleet, _kill, _restarted_server, _spin


def _final_model_checkpoint(srv) -> list:
    """
    Keep the bytes of ``srv``'s first checkpoint that holds the final model; return [bytes].

    Why: that checkpoint (taken as the final model is taken, before any of it goes out)
    owes every robot the model, as an older checkpoint restored after the robots left does
    (a state folder written before the stop orders were checkpointed, or whose later
    checkpoints were lost).
    """
    kept, checkpoint = [], srv.hooks.checkpoint

    def keeping():
        """Checkpoint, then keep the file's bytes the first time it holds the final model."""
        checkpoint()
        if not kept and srv.engine.final_values is not None:
            with open(srv.hooks.state.path, 'rb') as f:
                kept.append(f.read())

    srv.hooks.checkpoint = keeping
    return kept


@pytest.mark.parametrize('sync, robots_stay', [('rog', False), ('bsp', False), ('rog', True)])
def test_a_rog_server_restored_owing_the_final_model_finishes_the_run(
        tmp_path, monkeypatch, sync, robots_stay):
    # A checkpoint older than the stop orders (here the final model's, restored as if the
    # later ones were lost) owes every robot the final model. Restored after the robots
    # took it and left, the server waited at activate for robots gone (PeerTimeout after
    # startup_timeout, 3 s here, exit 1), wrote no summary.json nor model.pt, and the
    # state folder stayed unfinished. It waits at activate only for robots still
    # training; the engine sends the model it owes, gives up a robot that never
    # acknowledges it after the patience (FINAL_PATIENCE_S, 1 s here) as
    # final_model_missed, and the results are written.
    # Robots still there, waiting for it, get it from the restored server.
    from rog_ros.nodes.state_dir import finished_run
    from rog_ros.protocol import ps_final
    hub, srv, workers, server_args = _durable_fleet(tmp_path, monkeypatch, sync, '/ro', 1)
    state = str(tmp_path / 'state')
    nodes, back = [srv] + workers, None
    kept = _final_model_checkpoint(srv)
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        if robots_stay:                       # killed as it took the final model
            _spin(nodes, lambda: bool(kept))
        else:
            _spin(nodes, lambda: srv.engine.finished)
        assert kept
        _kill(hub, srv, nodes)
        if not robots_stay:
            _spin(nodes, lambda: all(w.engine.state == 'stopped' for w in workers))
            for w in workers:                 # the robots left, each with the final model
                assert w.engine.state == 'stopped'
                w.shutdown()
                nodes.remove(w)
        with open(state + '/server.pt', 'wb') as f:
            f.write(kept[0])                  # the older checkpoint is the one restored
        monkeypatch.setattr(ps_final, 'FINAL_PATIENCE_S', 1.0)
        back = _restarted_server(tmp_path, '/ro', server_args)
        assert sorted(back.engine._owed_final) == [0, 1] and not back.engine.finished
        assert back.activate()
        nodes.insert(0, back)
        start = time.monotonic()
        _spin(nodes, lambda: back.engine.finished, limit_s=30.0)
        took = time.monotonic() - start
        summary = back.finish()
    finally:
        for node in nodes + [n for n in (srv, back) if n is not None and n not in nodes]:
            node.shutdown()
    assert back.engine.finished and took < 5.0
    delivered = 2 if robots_stay else 0
    assert summary['final_model_delivered'] == delivered
    assert summary['final_model_missed'] == 2 - delivered and summary['completed'] is True
    assert (tmp_path / 'summary.json').exists() and (tmp_path / 'model.pt').exists()
    assert finished_run(state) is not None
    if robots_stay:
        assert all(w.engine.state == 'stopped' for w in workers)
