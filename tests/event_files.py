"""Reading back the TensorBoard summaries a run wrote (the pretraining loop's, fine-tuning's)."""

import glob
import os

import tensorflow as tf


def scalar_series(directory):
  """{tag: [(step, value)] in the order written} of the event files in `directory`."""
  series = {}
  for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.HasField("tensor") and not value.tensor.string_val:
          series.setdefault(value.tag, []).append(
              (event.step, float(tf.make_ndarray(value.tensor))))
  return series


def summary_tags(directory):
  """Every tag (scalars, images, ...) the event files in `directory` hold."""
  return {value.tag
          for path in glob.glob(os.path.join(directory, "events.out.tfevents.*"))
          for event in tf.compat.v1.train.summary_iterator(path)
          for value in event.summary.value}
