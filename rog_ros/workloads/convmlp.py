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
ConvMLP S/M/L image classifiers (Li et al. 2021, "ConvMLP: Hierarchical Convolutional MLPs").

Written from the paper's description in plain PyTorch so that the EACOL workload has the model the
Rog paper trained (ConvMLP-M, 65 MB of fp32 gradients) without timm or the SHI-Labs code. The
module structure (and hence `model.parameters()` order, which defines row ids) follows the
reference: tokenizer -> conv stage -> three Conv-MLP stages with conv downsampling -> LayerNorm
-> mean pool -> linear head.

Parameter counts with a 100-class head (asserted by test/test_workloads_convmlp.py; they match
specs/rog.md section 8.1, which computed them by instantiating the reference implementation, and
the published ImageNet counts 9.0 M / 17.4 M / 42.7 M minus the 1000-class head difference):

=========  ==========  =======  ================  ====================
variant    parameters  tensors  rows (dim-0 rule)  rows (+ <1000 -> 1 row)
=========  ==========  =======  ================  ====================
S          8,561,220   157      17,996             17,965
M          16,948,804  226      33,338             33,307
L          42,036,340  271      58,552             58,552
=========  ==========  =======  ================  ====================

Rows: dim-0 slices of every tensor with >= 2 dims, a 1-D tensor is one row. The artifact's
33,307 rows for M also make every tensor under 1000 elements one row: that only affects the
first tokenizer conv (32, 3, 3, 3) = 864 elements, 32 rows -> 1. Row lengths are 9 (depth-wise
3x3 kernels) to 2,304 (the (512, 256, 3, 3) downsampling conv) elements for M.

Batch-norm running statistics are buffers, not parameters: fleet protocols synchronise only
parameters, so by default the BN layers stay in eval mode even when the model is in training mode
(the artifact's `freeze_bn`). Every replica then computes the same function of the same weights.
"""

from __future__ import annotations

import torch
from torch import nn

# Reference configurations: blocks per Conv-MLP stage, stage widths, MLP ratios, tokenizer
# channels, residual conv blocks in the conv stage.
CONFIGS = {
    's': {'blocks': (2, 4, 2), 'dims': (128, 256, 512), 'mlp_ratios': (2, 2, 2),
          'channels': 64, 'n_conv_blocks': 2},
    'm': {'blocks': (3, 6, 3), 'dims': (128, 256, 512), 'mlp_ratios': (3, 3, 3),
          'channels': 64, 'n_conv_blocks': 3},
    'l': {'blocks': (4, 8, 3), 'dims': (192, 384, 768), 'mlp_ratios': (3, 3, 3),
          'channels': 96, 'n_conv_blocks': 3},
    # CPU demo size: same structure, ~0.3 M parameters; a forward+backward pass of 32 images
    # takes ~17 ms on 2 CPU cores, so a simulator can run thousands of worker iterations.
    'cpu': {'blocks': (1, 1, 1), 'dims': (32, 64, 128), 'mlp_ratios': (2, 2, 2),
            'channels': 16, 'n_conv_blocks': 1},
}


def _conv_bn_relu(c_in, c_out, kernel, stride):
    return [nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, bias=False),
            nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]


class ConvTokenizer(nn.Module):
    """Three 3x3 conv-BN-ReLU layers and a max-pool: a 4x spatial reduction into C channels."""

    def __init__(self, channels):
        super().__init__()
        half = channels // 2
        self.block = nn.Sequential(
            *_conv_bn_relu(3, half, 3, 2), *_conv_bn_relu(half, half, 3, 1),
            *_conv_bn_relu(half, channels, 3, 1), nn.MaxPool2d(3, 2, 1))

    def forward(self, x):
        return self.block(x)


class ConvStage(nn.Module):
    """Residual bottleneck conv blocks (1x1, 3x3, 1x1) followed by a strided 3x3 conv."""

    def __init__(self, n_blocks, c_in, hidden, c_out):
        super().__init__()
        self.conv_blocks = nn.ModuleList(
            nn.Sequential(*_conv_bn_relu(c_in, hidden, 1, 1), *_conv_bn_relu(hidden, hidden, 3, 1),
                          *_conv_bn_relu(hidden, c_in, 1, 1))
            for _ in range(n_blocks))
        self.downsample = nn.Conv2d(c_in, c_out, 3, 2, 1)

    def forward(self, x):
        for block in self.conv_blocks:
            x = x + block(x)
        return self.downsample(x)


class Mlp(nn.Module):
    """Channel MLP: Linear -> GELU -> Linear on channels-last tokens."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class DropPath(nn.Module):
    """Stochastic depth with its own generator, so a seeded run stays deterministic."""

    def __init__(self, rate, seed=0):
        super().__init__()
        self.rate = float(rate)
        self.generator = torch.Generator().manual_seed(seed)

    def forward(self, x):
        if not self.training or self.rate == 0.0:
            return x
        keep = 1.0 - self.rate
        mask = torch.rand((x.shape[0],) + (1,) * (x.dim() - 1), generator=self.generator)
        return x * (mask < keep).to(x.dtype).to(x.device) / keep


class ConvMLPBlock(nn.Module):
    """Channel MLP, depth-wise 3x3 conv (the spatial mixing), channel MLP; channels-last."""

    def __init__(self, dim, hidden, drop_path, seed):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.channel_mlp1 = Mlp(dim, hidden)
        self.norm2 = nn.LayerNorm(dim)
        self.connect = nn.Conv2d(dim, dim, 3, 1, 1, groups=dim, bias=False)
        self.connect_norm = nn.LayerNorm(dim)
        self.channel_mlp2 = Mlp(dim, hidden)
        self.drop_path = DropPath(drop_path, seed)

    def forward(self, x):
        x = x + self.drop_path(self.channel_mlp1(self.norm1(x)))
        x = self.connect(self.connect_norm(x).permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        return x + self.drop_path(self.channel_mlp2(self.norm2(x)))


class ConvDownsample(nn.Module):
    """Strided 3x3 conv between Conv-MLP stages (channels-last in and out)."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.downsample = nn.Conv2d(c_in, c_out, 3, 2, 1)

    def forward(self, x):
        return self.downsample(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


class BasicStage(nn.Module):
    """A run of Conv-MLP blocks at one width, then (except for the last stage) a downsample."""

    def __init__(self, n_blocks, dim, dim_next, mlp_ratio, drop_path, downsample, seed):
        super().__init__()
        rates = torch.linspace(0, drop_path, n_blocks).tolist()
        self.blocks = nn.ModuleList(
            ConvMLPBlock(dim, int(dim * mlp_ratio), rate, seed + i)
            for i, rate in enumerate(rates))
        self.downsample_mlp = ConvDownsample(dim, dim_next) if downsample else nn.Identity()

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.downsample_mlp(x)


class ConvMLP(nn.Module):
    """The hierarchical ConvMLP classifier; input (B, 3, H, W), output (B, num_classes) logits."""

    def __init__(self, blocks, dims, mlp_ratios, channels, n_conv_blocks, num_classes=100,
                 drop_path=0.0, freeze_bn=True, seed=0):
        super().__init__()
        self.freeze_bn = freeze_bn
        self.tokenizer = ConvTokenizer(channels)
        self.conv_stages = ConvStage(n_conv_blocks, channels, dims[0], dims[0])
        self.stages = nn.ModuleList(
            BasicStage(blocks[i], dims[i], dims[min(i + 1, len(dims) - 1)], mlp_ratios[i],
                       drop_path, i + 1 < len(blocks), seed + 100 * i)
            for i in range(len(blocks)))
        self.norm = nn.LayerNorm(dims[-1])
        self.head = nn.Linear(dims[-1], num_classes)
        self.apply(_init_weights)

    def train(self, mode=True):
        """Enter training mode; BN layers stay in eval mode when `freeze_bn` (see module doc)."""
        super().train(mode)
        if self.freeze_bn:
            for module in self.modules():
                if isinstance(module, nn.BatchNorm2d):
                    module.eval()
        return self

    def forward(self, x):
        x = self.conv_stages(self.tokenizer(x)).permute(0, 2, 3, 1)
        for stage in self.stages:
            x = stage(x)
        x = self.norm(x.flatten(1, 2)).mean(dim=1)
        return self.head(x)


def _init_weights(module):
    # Reference initialisation: truncated-normal linears, Kaiming convs, unit norms.
    if isinstance(module, nn.Linear):
        nn.init.trunc_normal_(module.weight, std=0.02)
        nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Conv2d):
        nn.init.kaiming_normal_(module.weight, mode='fan_out', nonlinearity='relu')
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, (nn.LayerNorm, nn.BatchNorm2d)):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def convmlp(size='m', num_classes=100, drop_path=0.0, freeze_bn=True, seed=0):
    """
    Build ConvMLP of a given size ('s', 'm', 'l' or 'cpu'), initialised from `seed`.

    Parameters
    ----------
    size : str
        Variant; default 'm' (the Rog paper's EACOL model, 16.9 M parameters with 100 classes).
    num_classes : int
        Classifier outputs; default 100 (CIFAR-100).
    drop_path : float
        Stochastic-depth rate of the last block of each stage; default 0.0 (the reference uses
        0.1 for training from scratch; fine-tuning with few iterations does not need it).
    freeze_bn : bool
        Keep BN running statistics fixed in training mode; default True (see module doc).
    seed : int
        Seed of the weight initialisation and of stochastic depth; same seed, same model.

    """
    if size not in CONFIGS:
        raise ValueError(f'unknown ConvMLP size {size!r}; expected one of {sorted(CONFIGS)}')
    generator_state = torch.random.get_rng_state()
    try:
        # nn.init draws from the global generator; fork it so callers' RNG state is untouched.
        torch.manual_seed(seed)
        return ConvMLP(num_classes=num_classes, drop_path=drop_path, freeze_bn=freeze_bn,
                       seed=seed, **CONFIGS[size])
    finally:
        torch.random.set_rng_state(generator_state)


def convmlp_small_cpu(num_classes=100, seed=0):
    """Build a ~0.3 M-parameter ConvMLP of the same structure, for CPU demos and simulation."""
    return convmlp('cpu', num_classes=num_classes, seed=seed)
