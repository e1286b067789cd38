"""Converts XLNet checkpoints: original TF1 / Hugging Face / own format -> own, original or
Hugging Face (config.json + model.safetensors that transformers' from_pretrained loads).

A fine-tuned head (an own-format directory with head.json) converts too; to huggingface where
transformers has the same head (XLNetLMHeadModel, XLNetForSequenceClassification,
XLNetForMultipleChoice, XLNetForTokenClassification, XLNetForQuestionAnswering), its
labels.json becoming config.json's id2label.

A Hugging Face directory may hold model.safetensors, pytorch_model.bin (read without torch, by
a weights-only unpickler) or tf_model.h5 (read with h5py); the report names the file read. The
output is written beside --output and moved there only once reloading it gave identical
outputs, so a failed run leaves no partial directory; a damaged input file ends the run with
one line naming it.

  python run/convert_checkpoint.py --input=xlnet_cased_L-12_H-768_A-12/xlnet_model.ckpt \
      --input_format=original --output=converted/ --output_format=own
  python run/convert_checkpoint.py --input=out/sst-2/best --input_format=own \
      --output=sst2-hf/ --output_format=huggingface
"""

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.serving.conversion import INPUT_FORMATS, OUTPUT_FORMATS, convert_checkpoint

flags.DEFINE_string("input", None, "Checkpoint prefix or directory (original), HF directory "
                    "(config.json + model.safetensors, pytorch_model.bin or tf_model.h5), or "
                    "own-format directory.")
flags.DEFINE_enum("input_format", "original", INPUT_FORMATS, "Format of --input.")
flags.DEFINE_string("config_file", None, "xlnet_config.json for an original checkpoint "
                    "(default: beside the checkpoint).")
flags.DEFINE_string("output", None, "Output directory.")
flags.DEFINE_enum("output_format", "own", OUTPUT_FORMATS, "Format to write.")
flags.mark_flags_as_required(["input", "output"])
FLAGS = flags.FLAGS


def main(argv):
  del argv
  print(convert_checkpoint(FLAGS.input, FLAGS.input_format, FLAGS.output, FLAGS.output_format,
                           FLAGS.config_file))


def entry():
  """The console script (setup.cfg) and run/convert_checkpoint.py."""
  cli.run(main, usage=__doc__)
