"""A Conformer encoder (Gulati et al. 2020) in plain torch, ESPnet-style parameter names.

Inputs follow ByteMLPerf's conformer_encoder.onnx: `src` [B, 3, 64, 512] (3 feature channels,
64 mel bins, 512 frames) and `src_pad_mask` [B, 128] (True = padded frame after the 4x
subsampling); output `memory` [B, 128, d_model].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True, kw_only=True)
class ConformerConfig:
    channels: int = 3
    mel_bins: int = 64
    d_model: int = 256
    heads: int = 4
    ffn: int = 2048
    layers: int = 12
    kernel: int = 31


SMALL = ConformerConfig(d_model=32, heads=2, ffn=64, layers=2, kernel=7)


class Subsampling4(nn.Module):
    """Two stride-2 3x3 convolutions: 512 frames -> 128, then a projection to d_model."""

    def __init__(self, cfg: ConformerConfig):
        super().__init__()
        d = cfg.d_model
        self.conv = nn.Sequential(
            nn.Conv2d(cfg.channels, d, 3, 2, 1), nn.ReLU(), nn.Conv2d(d, d, 3, 2, 1), nn.ReLU()
        )
        self.out = nn.Linear(d * (cfg.mel_bins // 4), d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)  # [B, d, F/4, T/4]
        b, c, f, t = x.shape
        return self.out(x.permute(0, 3, 1, 2).reshape(b, t, c * f))


class FeedForward(nn.Module):
    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(nn.functional.silu(self.w_1(x)))


class SelfAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads, self.d_k = heads, d // heads
        self.linear_q, self.linear_k = nn.Linear(d, d), nn.Linear(d, d)
        self.linear_v, self.linear_out = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, self.heads, self.d_k).transpose(1, 2)

        q, k, v = split(self.linear_q(x)), split(self.linear_k(x)), split(self.linear_v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        # the dtype's own lowest value: -1e9 overflows fp16 (model.half(), autocast)
        scores = scores.masked_fill(pad[:, None, None, :], torch.finfo(scores.dtype).min)
        out = scores.softmax(dim=-1) @ v
        return self.linear_out(out.transpose(1, 2).reshape(b, t, -1))


class ConvModule(nn.Module):
    def __init__(self, d: int, kernel: int):
        super().__init__()
        self.pointwise_conv1 = nn.Conv1d(d, 2 * d, 1)
        self.depthwise_conv = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.norm = nn.BatchNorm1d(d)
        self.pointwise_conv2 = nn.Conv1d(d, d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.glu(self.pointwise_conv1(x.transpose(1, 2)), dim=1)
        y = nn.functional.silu(self.norm(self.depthwise_conv(y)))
        return self.pointwise_conv2(y).transpose(1, 2)


class ConformerBlock(nn.Module):
    """Macaron FFN (half step), self-attention, convolution, FFN (half step), LayerNorm."""

    def __init__(self, cfg: ConformerConfig):
        super().__init__()
        d = cfg.d_model
        self.feed_forward_macaron, self.feed_forward = (
            FeedForward(d, cfg.ffn),
            FeedForward(d, cfg.ffn),
        )
        self.self_attn, self.conv_module = SelfAttention(d, cfg.heads), ConvModule(d, cfg.kernel)
        self.norm_ff_macaron, self.norm_mha, self.norm_conv = (
            nn.LayerNorm(d),
            nn.LayerNorm(d),
            nn.LayerNorm(d),
        )
        self.norm_ff, self.norm_final = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        x = x + 0.5 * self.feed_forward_macaron(self.norm_ff_macaron(x))
        x = x + self.self_attn(self.norm_mha(x), pad)
        x = x + self.conv_module(self.norm_conv(x))
        x = x + 0.5 * self.feed_forward(self.norm_ff(x))
        return self.norm_final(x)


def sinusoids(length: int, d: int) -> torch.Tensor:
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(length, d)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
    return pe


class ConformerEncoder(nn.Module):
    pe: torch.Tensor  # a buffer

    def __init__(self, cfg: ConformerConfig = ConformerConfig(), max_frames: int = 512):
        super().__init__()
        self.scale = math.sqrt(cfg.d_model)
        self.embed = Subsampling4(cfg)
        self.register_buffer("pe", sinusoids(max_frames, cfg.d_model), persistent=False)
        self.encoders = nn.ModuleList(ConformerBlock(cfg) for _ in range(cfg.layers))
        self.after_norm = nn.LayerNorm(cfg.d_model)

    def forward(self, src: torch.Tensor, src_pad_mask: torch.Tensor) -> torch.Tensor:
        x = self.embed(src)
        x = x * self.scale + self.pe[: x.shape[1]]
        for block in self.encoders:
            x = block(x, src_pad_mask)
        return self.after_norm(x)


def conformer_encoder(small: bool = False) -> ConformerEncoder:
    return ConformerEncoder(SMALL if small else ConformerConfig())
