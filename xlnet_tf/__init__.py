"""xlnet_tf: XLNet for TensorFlow 2 / Keras 3."""

from xlnet_tf.config import XLNetConfig
from xlnet_tf.model import XLNetModel

__version__ = "0.1.0"
__all__ = ["XLNetConfig", "XLNetModel"]
