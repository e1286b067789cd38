"""Keras layers of XLNet, the model's math: relative position encoding, masks, relative
attention (with `relative_attention_probabilities`, the score as the paper writes it),
feed-forward, dropout, the two-stream block."""

from xlnet_tf.modeling.layers.attention import (RelativeMultiHeadAttention,
                                                relative_attention_probabilities)
from xlnet_tf.modeling.layers.dropout import FastDropout
from xlnet_tf.modeling.layers.feed_forward import ACTIVATIONS, PositionwiseFeedForward
from xlnet_tf.modeling.layers.position_encoding import RelativePositionEncoding
from xlnet_tf.modeling.layers.two_stream_block import TwoStreamBlock

__all__ = ["ACTIVATIONS", "FastDropout", "PositionwiseFeedForward", "RelativeMultiHeadAttention",
           "RelativePositionEncoding", "TwoStreamBlock", "relative_attention_probabilities"]
