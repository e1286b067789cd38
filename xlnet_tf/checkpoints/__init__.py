"""Checkpoint loaders and writers: the original TF1, Hugging Face and own formats.

The formats: original TF1, Hugging Face (model.safetensors, pytorch_model.bin, tf_model.h5),
and our own (with labels.json, the class labels of a saved classifier or tagger:
checkpoints.labels; with quantization.json for a quantized model); `pretrained` is the one
rule for which paths are a model (a directory's layout, a TF1 checkpoint prefix, a hub id),
for the model classes' `from_pretrained` and the command-line tools alike; `conversion`
converts between the formats, verified.

Every loader is strict: a missing, unexpected or misshaped weight raises
`CheckpointMismatchError` naming it, and nothing is assigned. A pytorch_model.bin whose pickle
names anything but tensor storages raises `UnsafeCheckpointError` naming it, unrun.

The checkpoints stand below the model classes (xlnet_tf.modeling, xlnet_tf.heads): they read
and write any model handed to them by its variables, and build none but through the classes
handed to them (the conversion's `backbone_class` and `load_saved`).
"""

from xlnet_tf.checkpoints import pretrained
from xlnet_tf.checkpoints.assign import CheckpointMismatchError, LoadReport
from xlnet_tf.checkpoints.huggingface import config_from_huggingface, load_huggingface_checkpoint
from xlnet_tf.checkpoints.naming import backbone_of, original_variable_map
from xlnet_tf.checkpoints.original import load_original_checkpoint, save_original_checkpoint
from xlnet_tf.checkpoints.own import (load_own_checkpoint, load_pretrained_head,
                                      save_pretrained)
from xlnet_tf.checkpoints.pytorch_bin_io import UnsafeCheckpointError

LOADERS = {"own": load_own_checkpoint, "original": load_original_checkpoint,
           "huggingface": load_huggingface_checkpoint}

__all__ = ["LOADERS", "CheckpointMismatchError", "LoadReport", "UnsafeCheckpointError",
           "backbone_of", "config_from_huggingface", "load_huggingface_checkpoint",
           "load_original_checkpoint", "load_own_checkpoint", "load_pretrained_head",
           "original_variable_map", "pretrained", "save_original_checkpoint", "save_pretrained"]
