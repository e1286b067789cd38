"""Compiled kernels and custom gradients behind XLNet's layers.

Each module says what it computes, which plain expression in `xlnet_tf.modeling.layers` it equals
(`XLNetModel(config, fused=False)` runs those instead, tested equal), and why it exists, with
the gain measured on this project's CPU. Nothing here imports from the layers above.
"""

from xlnet_tf.modeling.ops.attention_probabilities import fused_attention_probabilities
from xlnet_tf.modeling.ops.bias_activation import fused_bias_activation_dropout
from xlnet_tf.modeling.ops.compile import compiled, in_xla_context, without_xla
from xlnet_tf.modeling.ops.flat_matmul import flat_matmul
from xlnet_tf.modeling.ops.int8_packing import constant_int8_weights
from xlnet_tf.modeling.ops.int8_products import int8_matmul
from xlnet_tf.modeling.ops.relative_shift import gather_relative_scores, rel_shift
from xlnet_tf.modeling.ops.residual_layer_norm import fused_residual_layer_norm

__all__ = ["compiled", "constant_int8_weights", "flat_matmul", "fused_attention_probabilities",
           "fused_bias_activation_dropout", "fused_residual_layer_norm", "gather_relative_scores",
           "in_xla_context", "int8_matmul", "rel_shift", "without_xla"]
