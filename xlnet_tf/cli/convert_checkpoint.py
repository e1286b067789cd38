"""Converts XLNet checkpoints: original TF1 / Hugging Face / own format -> own, original or
Hugging Face (config.json + model.safetensors that transformers' from_pretrained loads).

A fine-tuned head (an own-format directory with head.json) converts too; to huggingface where
transformers has the same head (XLNetLMHeadModel, XLNetForSequenceClassification,
XLNetForMultipleChoice, XLNetForTokenClassification, XLNetForQuestionAnswering), its
labels.json becoming config.json's id2label. The tokenizer of --input (spiece.model, with
tokenizer_config.json's settings) travels too: to huggingface as the files transformers'
XLNetTokenizer and AutoTokenizer load (spiece.model, tokenizer_config.json,
special_tokens_map.json).

A Hugging Face directory may hold model.safetensors, pytorch_model.bin (read without torch, by
a weights-only unpickler) or tf_model.h5 (read with h5py); the report names the file read. The
output is written beside --output and moved there only once reloading it gave identical
outputs, so a failed run leaves no partial directory; a damaged input file ends the run with
one line naming it.

--input is a directory in any of the three layouts, an original TF1 checkpoint prefix
(DIR/xlnet_model.ckpt, its xlnet_config.json beside it or given as --config_file) or a Hugging
Face hub id (fetched through huggingface_hub's cache): what from_pretrained reads. Its format is
what its files are (--input_format, when given, must say the same). --input and --output may be
remote (gs://...).

  python run/convert_checkpoint.py --input=xlnet_cased_L-12_H-768_A-12 --output=converted/
  python run/convert_checkpoint.py --input=out/sst-2/best --output=sst2-hf/ \
      --output_format=huggingface
  python run/convert_checkpoint.py --input=xlnet/xlnet-base-cased --output=base/
"""

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.checkpoints import pretrained
from xlnet_tf.checkpoints.conversion import INPUT_FORMATS, OUTPUT_FORMATS, convert_checkpoint
from xlnet_tf.heads import registry
from xlnet_tf.modeling.backbone import XLNetModel

from xlnet_tf.cli import pretrained_flags

flags.DEFINE_string("input", None, "Checkpoint prefix or directory (original), HF directory "
                    "(config.json + model.safetensors, pytorch_model.bin or tf_model.h5), "
                    "own-format directory, or a Hugging Face hub id.")
flags.DEFINE_enum("input_format", None, INPUT_FORMATS, "Format of --input (default: what its "
                  "files are).")
flags.DEFINE_string("config_file", None, "xlnet_config.json for an original checkpoint "
                    "(default: beside the checkpoint).")
flags.DEFINE_string("output", None, "Output directory.")
flags.DEFINE_enum("output_format", "own", OUTPUT_FORMATS, "Format to write.")
flags.mark_flags_as_required(["input", "output"])
FLAGS = flags.FLAGS


def main(argv):
  del argv
  place = pretrained_flags.located(FLAGS.input)
  input_format = pretrained_flags.checked_format(place, "input", "input_format")
  print(convert_checkpoint(pretrained.checkpoint_path(place), input_format, FLAGS.output,
                           FLAGS.output_format, FLAGS.config_file, backbone_class=XLNetModel,
                           load_saved=registry.load_saved))


def entry():
  """The console script (setup.cfg) and run/convert_checkpoint.py."""
  cli.run(main, usage=__doc__)
