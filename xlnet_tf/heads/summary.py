"""SequenceSummary: one vector per sequence, as the original `summarize_sequence`.

Shapes: B batch, T length, D d_model, N heads, H head size.

'last' takes the last position (XLNet puts <cls> there, left-padding the rest), 'first' the
first, 'mean' the average over all positions (padding included, as the original), 'attn' a
learned query (`summary_bias`) attending over the real tokens with absolute-position multi-head
attention and a LayerNorm without residual. Then a tanh projection (`summary`) and dropout.
Original variable scope: model/sequnece_summary (sic).
"""

import keras
import tensorflow as tf

from xlnet_tf import numerics
from xlnet_tf.modeling.layers.dropout import FastDropout

SUMMARY_TYPES = ("last", "first", "mean", "attn")
ORIGINAL_SCOPE = "model/sequnece_summary/"


@keras.saving.register_keras_serializable(package="xlnet_tf")
class SequenceSummary(keras.layers.Layer):
  """[B, T, D] (+ input_mask [B, T], 1 = real) -> [B, D].

  >>> import numpy as np
  >>> from xlnet_tf.heads import SequenceSummary
  >>> summary = SequenceSummary("attn", n_head=2, d_head=4)
  >>> sequence = np.random.default_rng(0).normal(size=[2, 5, 8]).astype(np.float32)
  >>> tuple(summary(sequence, input_mask=np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])).shape)
  (2, 8)
  """

  def __init__(self, summary_type: str = "last", n_head: int = 12, d_head: int = 64,
               dropout: float = 0.1, dropatt: float = 0.1, init_std: float = 0.02,
               use_proj: bool = True, **kwargs):
    super().__init__(**kwargs)
    if summary_type not in SUMMARY_TYPES:
      raise ValueError(f"summary_type must be one of {SUMMARY_TYPES}; got {summary_type!r}")
    self.summary_type = summary_type
    self.n_head, self.d_head = n_head, d_head
    self.dropout, self.dropatt, self.init_std = dropout, dropatt, init_std
    self.use_proj = use_proj
    self.projection = None
    self.output_dropout = FastDropout(dropout)
    self.attention_dropout = FastDropout(dropatt)

  def build(self, input_shape):
    d_model = input_shape[-1]
    # A new initializer per weight: one unseeded Keras initializer draws the same values at
    # every call.
    normal = lambda: keras.initializers.RandomNormal(stddev=self.init_std)  # noqa: E731
    if self.summary_type == "attn":
      shape = (d_model, self.n_head, self.d_head)
      self.summary_bias = self.add_weight(name="summary_bias", shape=(d_model,),
                                          initializer=normal())
      self.attention_kernels = {name: self.add_weight(name=name, shape=shape,
                                                      initializer=normal())
                                for name in "qkvo"}
      self.layer_norm = keras.layers.LayerNormalization(
          epsilon=numerics.LAYER_NORM_EPSILON, dtype="float32", name="LayerNorm")
      self.layer_norm.build((None, d_model))
    if self.use_proj:
      self.projection = keras.layers.Dense(d_model, activation="tanh",
                                           kernel_initializer=normal(), name="summary")
      self.projection.build((None, d_model))
    self.built = True

  def call(self, sequence, input_mask=None, training=False):
    if self.summary_type == "last":
      summary = sequence[:, -1]
    elif self.summary_type == "first":
      summary = sequence[:, 0]
    elif self.summary_type == "mean":
      summary = tf.reduce_mean(sequence, axis=1)
    else:
      summary = self._attend(sequence, input_mask, training)
    if self.projection is not None:
      summary = self.projection(summary)
    return self.output_dropout(summary, training=training)

  def _attend(self, sequence, input_mask, training):
    kernels = self.attention_kernels
    query = tf.einsum("d,dnh->nh", tf.cast(self.summary_bias, sequence.dtype), kernels["q"])
    keys = tf.einsum("btd,dnh->btnh", sequence, kernels["k"])
    values = tf.einsum("btd,dnh->btnh", sequence, kernels["v"])
    score = tf.cast(tf.einsum("nh,btnh->bnt", query, keys) / (self.d_head ** 0.5), tf.float32)
    if input_mask is not None:
      padding = tf.equal(tf.cast(input_mask, tf.float32), 0.0)[:, None, :]
      score = tf.where(padding, numerics.MASKED_SCORE, score)
    probability = self.attention_dropout(tf.nn.softmax(score, axis=-1), training=training)
    attended = tf.einsum("bnt,btnh->bnh", tf.cast(probability, sequence.dtype), values)
    output = tf.einsum("bnh,dnh->bd", attended, kernels["o"])
    output = self.output_dropout(output, training=training)
    return tf.cast(self.layer_norm(tf.cast(output, tf.float32)), sequence.dtype)

  def original_variables(self, scope: str = ORIGINAL_SCOPE):
    names = {}
    if self.projection is not None:
      names[scope + "summary/kernel"] = self.projection.kernel
      names[scope + "summary/bias"] = self.projection.bias
    if self.summary_type == "attn":
      names[scope + "summary_bias"] = self.summary_bias
      names.update({f"{scope}{name}/kernel": kernel
                    for name, kernel in self.attention_kernels.items()})
      names[scope + "LayerNorm/gamma"] = self.layer_norm.gamma
      names[scope + "LayerNorm/beta"] = self.layer_norm.beta
    return names

  def get_config(self):
    return {**super().get_config(), "summary_type": self.summary_type, "n_head": self.n_head,
            "d_head": self.d_head, "dropout": self.dropout, "dropatt": self.dropatt,
            "init_std": self.init_std, "use_proj": self.use_proj}
