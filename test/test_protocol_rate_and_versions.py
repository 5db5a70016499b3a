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
"""Throughput samples ignore bunched acks; RowVersions runs span rows a transfer skips."""

import numpy as np
import pytest
from rog_ros.core.compress import ScaledSign
from rog_ros.core.rows import RowLayout
from rog_ros.protocol.messages import TransferAck
from rog_ros.protocol.policies import make_policy
from rog_ros.protocol.ps_downlink import encode_versions
from rog_ros.protocol.transfer import OutgoingTransfer
from rog_ros.protocol.worker import WorkerEngine
import torch


def _transfer(layout, codec):
    p = torch.randn(layout.n_params)
    scales = codec.scales(layout, p)
    return OutgoingTransfer(transfer_id=1, sender=0, receiver=-1, kind=1, clock=1,
                            layout=layout, codec=codec, rowbytes=codec.encode(layout, p, scales),
                            scales=scales, order=torch.arange(layout.n_rows),
                            n_mandatory=layout.n_rows, deadline=float('inf'), now=0.0,
                            window=4, chunk_bytes=1024)


@pytest.mark.parametrize('bunched', [True, False])
def test_throughput_sample_ignores_bunched_acks(bunched):
    layout, codec = RowLayout([(200, 400)], whole_model=False), ScaledSign()   # 10 kB
    tr = _transfer(layout, codec)
    tr.pump(0.0)
    total, sent = 0, tr.next_seq                       # the first window
    for k in range(sent):
        t = 1.0 + 1e-4 * k if bunched else 0.25 * (k + 1)   # bunched: all at ~1 s
        total += int(tr.plan.nbytes[k])
        tr.on_ack(TransferAck(transfer_id=1, sender=-1, receiver=0, seq=k, final=False,
                              bytes_received=int(tr.plan.nbytes[k]), receive_time=t), t)
    nbytes, secs = tr.throughput_sample()
    rate = nbytes / secs
    if bunched:      # the chunks took 1 s; the ack spacing (0.3 ms) says nothing
        assert rate == pytest.approx(total / (1.0 + 1e-4 * (sent - 1)))
    else:            # spread acks: first round trip excluded
        assert rate == pytest.approx((total - int(tr.plan.nbytes[0]))
                                     / (0.25 * (sent - 1)))


def test_row_versions_span_skipped_rows_and_decode_exactly():
    layout, n = RowLayout([(300, 40)], whole_model=False), 3
    g = torch.Generator().manual_seed(0)
    v = torch.randint(0, 3, (layout.n_rows, n), generator=g, dtype=torch.int32)
    v[100:200] = 7
    rows = np.sort(np.random.default_rng(0).choice(layout.n_rows, 120, replace=False))
    msg = encode_versions(1, 0, v, rows)
    vv = v[torch.from_numpy(rows)].numpy()
    assert len(msg.run_starts) == 1 + int(np.any(vv[1:] != vv[:-1], axis=1).sum())
    mask = torch.zeros(layout.n_rows, dtype=torch.bool)
    mask[torch.from_numpy(rows)] = True
    w = WorkerEngine(0, n, layout, ScaledSign(), make_policy('rog:4'),
                     torch.zeros(layout.n_params))
    w._apply_versions(msg, mask)
    assert torch.equal(w.vloc[mask], v[mask])
    assert int(w.vloc[~mask].abs().sum()) == 0           # skipped rows keep their versions
