"""The backbone: XLNetModel over its layers (`layers/`) and compiled kernels (`ops/`), the
checks of its inputs, layer freezing, the recurrence memory and the numerical constants."""

from xlnet_tf.checkpoints.naming import backbone_of
from xlnet_tf.modeling.backbone import XLNetModel
from xlnet_tf.modeling.inputs import BACKBONE_INPUTS, backbone_inputs
from xlnet_tf.modeling.memory import RecurrenceMemory

__all__ = ["BACKBONE_INPUTS", "RecurrenceMemory", "XLNetModel", "backbone_inputs",
           "backbone_of"]
