"""XLNetHead: what every task model over an XLNetModel shares (construction, serialization)."""

import keras

from xlnet_tf.config import XLNetConfig
from xlnet_tf.modeling.backbone import XLNetModel


class XLNetHead(keras.Model):
  """A task model with an XLNetModel at `self.backbone`.

  Subclasses pass their own constructor arguments through `head_config()` for serialization,
  and name their weights for checkpoints with `original_head_variables()` (original TF1
  names) and, where Hugging Face has the head, `huggingface_head_names()`.
  """

  def __init__(self, backbone, **kwargs):
    if isinstance(backbone, (dict, XLNetConfig)):
      backbone = XLNetModel(backbone)
    kwargs.setdefault("name", "model")  # the original's top-level scope
    super().__init__(**kwargs)
    self.backbone = backbone
    # Heads create every weight in __init__. Marked built now, Keras never traces them on
    # placeholders of its default (float) dtype, which token ids cannot take.
    self.built = True

  def head_config(self) -> dict:
    return {}

  def get_config(self):
    return {"backbone": keras.saving.serialize_keras_object(self.backbone), "name": self.name,
            **self.head_config()}

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    return cls(keras.saving.deserialize_keras_object(config.pop("backbone")), **config)
