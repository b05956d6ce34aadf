"""TensorFlow/Keras builders: RoFormer classifier and Wide & Deep (Criteo), exported with tf2onnx.

Layer names follow bert4keras (RoFormer: `Embedding-Token`, `Transformer-0-MultiHeadSelfAttention`,
...), whose public RoFormer checkpoints map onto them by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True, kw_only=True)
class RoFormerConfig:
    vocab_size: int = 50000  # junnyu/roformer_chinese_base / ZhuiyiTechnology RoFormer-base
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    ffn: int = 3072
    segments: int = 2
    length: int = 1024
    num_classes: int = 1  # one similarity score per row: ByteMLPerf's CAIL2019 rule compares rows


ROFORMER_SMALL = RoFormerConfig(vocab_size=1000, hidden=32, layers=2, heads=2, ffn=64, length=64)


@dataclass(frozen=True)
class WideDeepConfig:
    fields: int = 26
    numeric: int = 13
    buckets: int = 10000  # hashed vocabulary per categorical field
    embedding: int = 16
    hidden: tuple[int, ...] = (1024, 512, 256)


WIDEDEEP_SMALL = WideDeepConfig(buckets=100, embedding=4, hidden=(16,))


def rotary_tables(length: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Sinusoidal rotation tables [length, dim], each frequency repeated for its (even, odd)
    pair."""
    inv = 10000.0 ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    angles = np.arange(length, dtype=np.float64)[:, None] * inv[None, :]
    return (
        np.repeat(np.sin(angles), 2, axis=1).astype(np.float32),
        np.repeat(np.cos(angles), 2, axis=1).astype(np.float32),
    )


def _attention_layer_class():
    import keras
    from keras import ops

    class RotarySelfAttention(keras.layers.Layer):
        """Multi-head self-attention with rotary position embeddings on queries and keys."""

        def __init__(self, hidden: int, heads: int, length: int, **kwargs):
            super().__init__(**kwargs)
            self.hidden, self.heads, self.head_dim = hidden, heads, hidden // heads
            self.q_dense = keras.layers.Dense(hidden, name="q")
            self.k_dense = keras.layers.Dense(hidden, name="k")
            self.v_dense = keras.layers.Dense(hidden, name="v")
            self.o_dense = keras.layers.Dense(hidden, name="o")
            sin, cos = rotary_tables(length, self.head_dim)
            self.sin, self.cos = sin[None, :, None, :], cos[None, :, None, :]

        def build(self, input_shape):
            for dense in (self.q_dense, self.k_dense, self.v_dense):
                dense.build(input_shape)
            self.o_dense.build(input_shape)

        def _rotate(self, x):
            shape = ops.shape(x)
            pairs = ops.reshape(x, (shape[0], shape[1], self.heads, self.head_dim // 2, 2))
            swapped = ops.stack([-pairs[..., 1], pairs[..., 0]], axis=-1)
            return x * self.cos + ops.reshape(swapped, shape) * self.sin

        def call(self, x, mask):
            b, t = ops.shape(x)[0], ops.shape(x)[1]
            bias = ops.reshape((1.0 - mask) * -1e9, (b, 1, 1, t))

            def split(y):
                return ops.reshape(y, (b, t, self.heads, self.head_dim))

            q = self._rotate(split(self.q_dense(x)))
            k = self._rotate(split(self.k_dense(x)))
            v = split(self.v_dense(x))
            scores = ops.einsum("bqhd,bkhd->bhqk", q, k) / float(np.sqrt(self.head_dim)) + bias
            out = ops.einsum("bhqk,bkhd->bqhd", ops.softmax(scores, axis=-1), v)
            return self.o_dense(ops.reshape(out, (b, t, self.hidden)))

    return RotarySelfAttention


def gelu_erf(x):
    """Exact GELU through erf: Keras' own gelu lowers to Erfc, which ONNX has no op for."""
    from keras import ops

    return 0.5 * x * (1.0 + ops.erf(x / float(np.sqrt(2.0))))


def roformer_classifier(cfg: RoFormerConfig):
    """RoFormer-base encoder + [CLS] similarity score (sigmoid); float32 inputs hold token/segment
    ids."""
    import keras
    from keras import layers, ops

    attention = _attention_layer_class()
    token = keras.Input((cfg.length,), dtype="float32", name="input_token")
    segment = keras.Input((cfg.length,), dtype="float32", name="input_segment")
    ids, segs = ops.cast(token, "int32"), ops.cast(segment, "int32")
    mask = ops.cast(ops.not_equal(ids, 0), "float32")
    x = layers.Embedding(cfg.vocab_size, cfg.hidden, name="Embedding-Token")(ids)
    x = x + layers.Embedding(cfg.segments, cfg.hidden, name="Embedding-Segment")(segs)
    x = layers.LayerNormalization(epsilon=1e-12, name="Embedding-Norm")(x)
    for i in range(cfg.layers):
        name = f"Transformer-{i}"
        a = attention(cfg.hidden, cfg.heads, cfg.length, name=f"{name}-MultiHeadSelfAttention")(
            x, mask
        )
        x = layers.LayerNormalization(epsilon=1e-12, name=f"{name}-MultiHeadSelfAttention-Norm")(
            x + a
        )
        f = layers.Dense(cfg.ffn, activation=gelu_erf, name=f"{name}-FeedForward-1")(x)
        f = layers.Dense(cfg.hidden, name=f"{name}-FeedForward-2")(f)
        x = layers.LayerNormalization(epsilon=1e-12, name=f"{name}-FeedForward-Norm")(x + f)
    cls = layers.Dense(cfg.hidden, activation="tanh", name="Pooler-Dense")(x[:, 0])
    activation = "sigmoid" if cfg.num_classes == 1 else "softmax"
    probs = layers.Dense(cfg.num_classes, activation=activation, name="Identity")(cls)
    return keras.Model([token, segment], probs, name="roformer")


def wide_and_deep(cfg: WideDeepConfig):
    """Wide (linear over hashed ids + numerics) and deep (embeddings + MLP) CTR model.

    `new_categorical_placeholder` is [26*B, 2]: row r holds two hashed ids of categorical field
    r % 26 of sample r // 26; `new_numeric_placeholder` is [B, 13]. Output: [B, 2] probabilities.
    """
    import keras
    from keras import layers, ops

    cat = keras.Input((2,), dtype="int64", name="new_categorical_placeholder")
    num = keras.Input((cfg.numeric,), dtype="float32", name="new_numeric_placeholder")
    offsets = (np.arange(cfg.fields, dtype=np.int64) * cfg.buckets)[None, :, None]
    ids = ops.reshape(cat, (-1, cfg.fields, 2)) + offsets
    vocab = cfg.fields * cfg.buckets
    wide = ops.sum(layers.Embedding(vocab, 1, name="wide_embedding")(ids), axis=(1, 2, 3))[:, None]
    wide = wide + layers.Dense(1, name="wide_numeric")(num)
    deep = ops.reshape(
        layers.Embedding(vocab, cfg.embedding, name="deep_embedding")(ids),
        (-1, cfg.fields * 2 * cfg.embedding),
    )
    deep = ops.concatenate([deep, num], axis=1)
    for i, units in enumerate(cfg.hidden):
        deep = layers.Dense(units, activation="relu", name=f"deep_dense_{i}")(deep)
    logit = wide + layers.Dense(1, name="deep_logit")(deep)
    p = ops.sigmoid(logit)
    probs = ops.concatenate([1.0 - p, p], axis=1)
    return keras.Model([cat, num], probs, name="wide_deep")


def _seeded_keras(seed: int) -> None:
    import keras

    keras.utils.set_random_seed(seed)


def _load_keras_weights(model, weights_dir: Path | None):
    if weights_dir is not None:
        model.load_weights(str(weights_dir / "model.weights.h5"))
    return model


def build_roformer(small: bool = False, weights_dir: Path | None = None, seed: int = 0):
    _seeded_keras(seed)
    return _load_keras_weights(
        roformer_classifier(ROFORMER_SMALL if small else RoFormerConfig()), weights_dir
    )


def build_widedeep(small: bool = False, weights_dir: Path | None = None, seed: int = 0):
    _seeded_keras(seed)
    return _load_keras_weights(
        wide_and_deep(WIDEDEEP_SMALL if small else WideDeepConfig()), weights_dir
    )
