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
DeepTest-style image corruptions in torch: blur ladder, fog, brightness, contrast, affine.

EACOL's environmental noise. DeepTest (Tian et al. 2018) and the Rog artifact use OpenCV
transforms; these are vectorised torch equivalents on float images in [0, 1], shape
(N, 3, H, W), deterministic for a seed (random fields come from a `torch.Generator`).

`blur(x, level)` follows the artifact's 10-level ladder: 1-3 box 3/4/5, 4-6 Gaussian 3/4/5,
7-9 median 3/4/5, 10 bilateral (9, 75, 75). Even kernels (4), which OpenCV rejects for Gaussian
and median, are applied here with the half-pixel shift they imply. `fog` blends towards a bright
haze whose density varies smoothly over the image, then softens detail, as real fog scatters
light. `corrupt(x, spec, seed)` applies a named preset or a list of (name, level) pairs.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

# Blur ladder (artifact `utils/all_noise.py`): level -> (kind, kernel size).
BLUR_LADDER = {1: ('box', 3), 2: ('box', 4), 3: ('box', 5), 4: ('gaussian', 3),
               5: ('gaussian', 4), 6: ('gaussian', 5), 7: ('median', 3), 8: ('median', 4),
               9: ('median', 5), 10: ('bilateral', 9)}


def _pad_for(k):
    # (left, right, top, bottom) so that the output keeps the input size for odd and even k.
    lo = (k - 1) // 2
    return (lo, k - 1 - lo, lo, k - 1 - lo)


def _depthwise(x, kernel):
    k = kernel.shape[-1]
    weight = kernel.to(x.dtype).expand(x.shape[1], 1, k, k)
    return F.conv2d(F.pad(x, _pad_for(k), mode='replicate'), weight, groups=x.shape[1])


def _gaussian_kernel(k, sigma=None):
    # OpenCV's default sigma for a given kernel size.
    sigma = sigma or 0.3 * ((k - 1) * 0.5 - 1) + 0.8
    t = torch.arange(k, dtype=torch.float64) - (k - 1) / 2
    g = torch.exp(-t * t / (2 * sigma * sigma))
    g = (g / g.sum()).float()
    return torch.outer(g, g)


def _patches(x, k):
    # (N, C, H*W, k*k) neighbourhoods, replicate-padded.
    n, c, h, w = x.shape
    cols = F.unfold(F.pad(x, _pad_for(k), mode='replicate').reshape(n * c, 1, h + k - 1,
                                                                    w + k - 1), k)
    return cols.reshape(n, c, k * k, h * w).transpose(2, 3)


def blur(x, level):
    """Blur of DeepTest level 1..10 (see `BLUR_LADDER`)."""
    kind, k = BLUR_LADDER[int(level)]
    if kind == 'box':
        return _depthwise(x, torch.full((k, k), 1.0 / (k * k)))
    if kind == 'gaussian':
        return _depthwise(x, _gaussian_kernel(k))
    if kind == 'median':
        return _patches(x, k).median(dim=-1).values.reshape(x.shape)
    return bilateral(x, k, sigma_color=75 / 255, sigma_space=75.0)


def bilateral(x, k=9, sigma_color=75 / 255, sigma_space=75.0):
    """Edge-preserving bilateral filter (OpenCV semantics for d=k, sigmas on a 0..1 scale)."""
    patches = _patches(x, k)  # (N, C, HW, k*k)
    centre = x.flatten(2)[..., None]
    t = torch.arange(k, dtype=x.dtype) - (k - 1) / 2
    spatial = torch.exp(-(t[:, None] ** 2 + t[None] ** 2) / (2 * sigma_space ** 2)).flatten()
    # OpenCV weights colour distance over all channels jointly.
    colour = ((patches - centre) ** 2).sum(1, keepdim=True)
    weight = spatial * torch.exp(-colour / (2 * sigma_color ** 2))
    out = (patches * weight).sum(-1) / weight.sum(-1)
    return out.reshape(x.shape)


def fog(x, level, generator):
    """Fog of level 1..10: haze of density ~0.07*level, smoothly varying, plus softening."""
    n, _, h, w = x.shape
    coarse = torch.rand(n, 1, 4, 4, generator=generator)
    field = F.interpolate(coarse, size=(h, w), mode='bicubic', align_corners=False).clamp(0, 1)
    density = (0.07 * level * (0.6 + 0.8 * field)).clamp(0, 0.95)
    haze = 0.75 + 0.2 * torch.rand(n, 1, 1, 1, generator=generator)
    hazy = x * (1 - density) + haze * density
    sigma = 0.25 * level
    k = 2 * math.ceil(2 * sigma) + 1
    return _depthwise(hazy, _gaussian_kernel(k, sigma)) if level > 0 else hazy


def brightness(x, level):
    """Add 10*level grey levels (of 255), DeepTest's brightness transform."""
    return (x + 10 * level / 255).clamp(0, 1)


def contrast(x, level):
    """Scale pixel values by (1 + 0.2*level) around 0, as DeepTest (OpenCV multiply)."""
    return (x * (1 + 0.2 * level)).clamp(0, 1)


def affine(x, angle_deg=0.0, shift_px=(0.0, 0.0)):
    """Rotate about the centre and translate (pixels), with border replication."""
    n, _, h, w = x.shape
    a = math.radians(angle_deg)
    theta = torch.tensor([[math.cos(a), -math.sin(a), -2 * shift_px[0] / w],
                          [math.sin(a), math.cos(a), -2 * shift_px[1] / h]], dtype=x.dtype)
    grid = F.affine_grid(theta.expand(n, 2, 3), list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode='bilinear', padding_mode='border', align_corners=False)


def rotation(x, level):
    """Rotate by 3*level degrees (DeepTest's rotation step)."""
    return affine(x, angle_deg=3.0 * level)


def translation(x, level):
    """Translate by `level` pixels on both axes (DeepTest's 10p px at 224 px is ~1.4p at 32)."""
    return affine(x, shift_px=(float(level), float(level)))


# Named presets: the environments EACOL adapts to.
PRESETS = {
    'fog': [('fog', 3)],
    'blur': [('blur', 3)],
    'fog+blur': [('fog', 4), ('blur', 5)],
    'mixed': [('fog', 3), ('blur', 4), ('brightness', 3), ('rotation', 2)],
}
_OPS = {'blur': blur, 'brightness': brightness, 'contrast': contrast, 'rotation': rotation,
        'translation': translation}


def corrupt(x, spec='fog', seed=0, chunk=4096):
    """
    Apply a corruption to uint8 or float images; returns the same dtype.

    Parameters
    ----------
    x : tensor (N, 3, H, W)
        uint8 in 0..255 or float in 0..1.
    spec : str or list of (name, level)
        A `PRESETS` key, 'name:level' (e.g. 'blur:7'), or a list of (name, level) pairs applied
        in order. Names: fog, blur, brightness, contrast, rotation, translation.
    seed : int
        Seed of the random fog fields: same seed, same images.
    chunk : int
        Images per step (bounds the memory of the median and bilateral patch tensors).

    """
    steps = _parse(spec)
    g = torch.Generator().manual_seed(seed)
    is_uint8 = x.dtype == torch.uint8
    outs = []
    for part in x.split(chunk):
        y = part.float() / 255 if is_uint8 else part
        for name, level in steps:
            y = fog(y, level, g) if name == 'fog' else _OPS[name](y, level)
        outs.append((y.clamp(0, 1) * 255).round().to(torch.uint8) if is_uint8 else y)
    return torch.cat(outs)


def _parse(spec):
    if isinstance(spec, str):
        if spec in PRESETS:
            return PRESETS[spec]
        name, _, level = spec.partition(':')
        spec = [(name, int(level or 5))]
    steps = [(str(n), int(v)) for n, v in spec]
    for name, level in steps:
        if name != 'fog' and name not in _OPS:
            raise ValueError(f'unknown corruption {name!r}')
        if name == 'blur' and level not in BLUR_LADDER:
            raise ValueError(f'blur level must be 1..10, got {level}')
    return steps
