"""TensorBoard for pretraining: the run's writer (training.summaries, as fine-tuning's), and
images of one example's permutation masks and per-head attention maps.

The masks are the paper's Figures 5-6 for a real example: the content stream may see itself,
the query stream may not. White = may attend. Masked-LM and left-to-right LM data have no
permutation masks.
"""

import os

import tensorflow as tf

from xlnet_tf.modeling.backbone import backbone_inputs
from xlnet_tf.modeling.ops.compile import without_xla
from xlnet_tf.pretraining.data.records import pretraining_dataset
from xlnet_tf.training.summaries import SUMMARY_DIR, scalar_writer


def _image(matrix):
  """[H, W] in [0, 1] -> [1, H, W, 1] float32 for tf.summary.image."""
  return tf.cast(matrix, tf.float32)[None, :, :, None]


def write_example_images(writer, pretrainer, data: str, step: int) -> None:
  batch = next(iter(pretraining_dataset(data, repeat=False)))
  inputs = backbone_inputs(batch)
  if "perm_mask" not in batch:
    inputs.pop("target_mapping", None)  # masked or left-to-right LM: the content stream only
  # One eager forward of one batch (twice a run): compiling its regions (8 kernels, one per
  # input signature) costs more than it saves; measured on the main job's batch, 1.7 s then
  # 0.2 s compiled against 0.45 s then 0.25 s as plain ops.
  with without_xla():
    outputs = pretrainer.backbone(inputs, training=False, return_attention=True)
  probabilities = outputs["attention"][0][0]  # layer 0, example 0: [N, T, K]
  with writer.as_default(step=step):
    if "perm_mask" in batch:
      query_visible = 1.0 - batch["perm_mask"][0]  # [T, T]
      content_visible = tf.maximum(query_visible, tf.eye(tf.shape(query_visible)[0]))
      tf.summary.image("permutation/content_stream_visible", _image(content_visible))
      tf.summary.image("permutation/query_stream_visible", _image(query_visible))
    peak = tf.reduce_max(probabilities, axis=[1, 2], keepdims=True)
    tf.summary.image("attention/layer_0_heads", (probabilities / peak)[:, :, :, None],
                     max_outputs=int(probabilities.shape[0]))
  writer.flush()


def run_writer(model_dir: str, enabled: bool, pretrainer, data: str, step: int):
  """The writer of model_dir/train (a no-op one unless `enabled`: summaries on, the chief); a
  run that starts (step 0) gets the example images first. A resumed run adds to the curves."""
  writer = scalar_writer(os.path.join(model_dir, SUMMARY_DIR) if enabled else None)
  if enabled and step == 0:
    write_example_images(writer, pretrainer, data, step)
  return writer
