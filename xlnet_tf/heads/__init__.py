"""Task heads over XLNetModel."""

from xlnet_tf.heads.pretrainer import XLNetPretrainer

__all__ = ["XLNetPretrainer"]
