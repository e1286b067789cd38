"""Keras layers of XLNet: relative position encoding, relative attention, two-stream block."""

from xlnet_tf.layers.attention import RelativeMultiHeadAttention
from xlnet_tf.layers.feed_forward import PositionwiseFeedForward
from xlnet_tf.layers.position_encoding import RelativePositionEncoding
from xlnet_tf.layers.two_stream_block import TwoStreamBlock

__all__ = ["RelativeMultiHeadAttention", "PositionwiseFeedForward", "RelativePositionEncoding",
           "TwoStreamBlock"]
