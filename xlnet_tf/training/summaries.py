"""TensorBoard scalars of a training run, the pretraining loop's and fine-tuning's: the writer of
the run's event files and the one way a step's values are written (pretraining.summaries adds
its images to the same writer)."""

import os
from typing import Dict, Optional

import tensorflow as tf

from xlnet_tf.utils import files

SUMMARY_DIR = "train"  # under the run's directory (model_dir, --output_dir): the event files


def scalar_writer(directory: Optional[str], replace: bool = False):
  """A summary writer of event files in `directory`; a no-op one without it (summaries off, or
  not the chief). `replace`: first remove the event files a previous run left there (a run that
  starts over, whose curves would otherwise run back from its last step to its first)."""
  if not directory:
    return tf.summary.create_noop_writer()
  if replace:
    for path in files.glob(os.path.join(directory, "events.out.tfevents.*")):
      files.remove(path)
  return tf.summary.create_file_writer(directory)


def write_scalars(writer, step: int, values: Dict[str, float]) -> None:
  """One scalar per name at `step`."""
  with writer.as_default(step=step):
    for name, value in values.items():
      tf.summary.scalar(name, value)
