"""Exports a fine-tuned head (or the backbone) as a SavedModel for TF Serving.

  python run/export.py --model_dir=out/sst-2/best --head=classifier \
      --export_base=serving --model_name=sst2 --check

A head's construction (class count, pooling, ...) comes from the head.json the fine-tuning run
saved beside the weights, and so does the tokenizer (spiece.model, tokenizer_config.json) and
the packed length (preprocessor.json: the run's --max_seq_length, the default of
--max_seq_length here). The labels.json saved there is copied into the SavedModel's assets,
and the classifier's signatures return predicted_label_name (labels[predicted_label]) beside
predicted_label (multi-label: predicted_label_names, the label where predicted, else ""; a
tagger: predicted_label_names per token). Directories without head.json take --num_classes
(default: the labels.json count, else 2), --summary_type and --task_name.

--check loads the SavedModel in a fresh process with only tensorflow and tensorflow_text (as
TF Serving meets it; `saved_model_cli run` cannot load the SentencePiece op), runs each
signature on a check batch and compares its outputs with the Keras model's, one line per
signature; a difference is one error line and nothing is placed. With an existing --version
(and no --overwrite) it checks that version against --model_dir and writes nothing: give the
--dtype, --quantize and --xla it was exported with.

--model_dir may also be a Hugging Face directory or hub id holding the head --head names
(config.json's "architectures", e.g. XLNetForSequenceClassification; its id2label the labels),
or any pretrained directory for --head=backbone. The SentencePiece model and lower-casing are
the directory's (spiece.model, tokenizer_config.json) unless --sp_path / --uncased say
otherwise:

  python run/export.py --model_dir=OWNER/xlnet-sst2 --export_base=serving --model_name=sst2

--dtype=bfloat16 serves in bfloat16 (float32 outputs), for CPUs with bfloat16 matmuls.

The version directory appears only when complete (written under a dot name beside it, then
renamed; TF Serving loads only all-digit names). An existing --version is refused; --overwrite
replaces it (swapped in when complete). On a remote base (gs://) the files are copied in with
saved_model.pb last, and an existing version is refused even with --overwrite.

--format=onnx|litert writes `<export_base>/<model_name>/<version>/model.onnx` (or model.tflite)
instead: the ids signature only (input_ids, segment_ids, input_mask -> the head's outputs; the
caller tokenizes and packs), with the SentencePiece model and labels.json beside it, checked
against the Keras model before it is moved there (ONNX needs `pip install 'xlnet_tf[export]'`).

  python run/export.py --model_dir=out/sst-2/best --head=classifier --sp_path=spiece.model \
      --export_base=serving --model_name=sst2 --format=onnx

--quantize=int8 serves int8 weights (activations quantized per token when called). A
SavedModel: the model is quantized (model.quantize("int8")) and checked against the float
model on a check batch (max relative error of the floating outputs at most 0.1, else one
error line and nothing is written); its int8 kernels are constants of the graph, multiplied
by oneDNN's int8 kernel (any x86 TensorFlow / TF Serving build; 1.5-1.7x the float32
SavedModel's speed on a CPU with VNNI, 1.4x on an AVX2 one, where the model server needs
TF_ENABLE_ONEDNN_OPTS=1 and the rows are 7-bit: docs/export.md). With --format=onnx the float
file is built and checked as above, then quantized (ONNX Runtime's dynamic quantization)
and the int8 file checked against the float one the same way; the version holds the int8
file alone, as model.onnx (a model server loads one model.onnx a version); for the float file
too, export it under another --version or --model_name.

  python run/export.py --model_dir=out/sst-2/best --export_base=serving --model_name=sst2 \
      --quantize=int8
"""

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py
import keras

from xlnet_tf.checkpoints import pretrained
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.modeling.backbone import XLNetModel
from xlnet_tf.serving.saved_model import (CLASS_COUNT, EXPORT_HEADS, POOLING_ARGUMENTS,
                                          QUANTIZE_MODES, export_saved_model,
                                          load_exportable_model, version_directory)
from xlnet_tf.serving.saved_model_check import check_saved_model
from xlnet_tf.serving.onnx_litert import EXPORT_FORMATS, export_file
from xlnet_tf.serving.onnx_quantization import TOLERANCE as INT8_TOLERANCE, Int8CheckError
from xlnet_tf.serving.version_directories import check_version_free
from xlnet_tf.text.preprocessor import saved_preprocessor
from xlnet_tf.text.tokenizer import check_vocabulary
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError, require

from xlnet_tf.cli import pretrained_flags

flags.DEFINE_string("model_dir", None, "The model: an own-format directory (xlnet_config.json "
                    "+ weights, e.g. a fine-tuning run's best/), a Hugging Face directory or "
                    "hub id, or (--head=backbone) any pretrained directory.")
flags.DEFINE_enum("head", "classifier", sorted(EXPORT_HEADS) + ["backbone"],
                  "What the weights are.")
flags.DEFINE_integer("num_classes", None, "Classes of a classifier (labels of a token "
                     "classifier). Default: head.json's, else the labels in "
                     "--model_dir/labels.json, else 2.")
flags.DEFINE_string("summary_type", None, "Pooling of a classifier. Default: head.json's, "
                    "else last.")
flags.DEFINE_string("task_name", None, "Task name of a classifier (original names). Default: "
                    "head.json's, else task.")
flags.DEFINE_string("sp_path", None, "SentencePiece model (copied into the assets; default: "
                    "--model_dir's spiece.model).")
flags.DEFINE_bool("uncased", False, "Lower-case the text (default: as --model_dir's "
                  "tokenizer_config.json says).")
flags.DEFINE_bool("text_pairs", False, "serving_default takes text and text_b.")
flags.DEFINE_integer("max_seq_length", 128, "Longest input; longer texts are truncated. "
                     "Default: --model_dir's preprocessor.json (a fine-tuning run's "
                     "--max_seq_length), else 128.")
flags.DEFINE_string("export_base", "serving", "TF Serving's model base path.")
flags.DEFINE_string("model_name", "xlnet", "Model name.")
flags.DEFINE_integer("version", 1, "Model version: the directory <export_base>/<model_name>/"
                     "<version>/, which appears only when complete. An existing version is "
                     "refused unless --overwrite.")
flags.DEFINE_bool("overwrite", False, "Replace an existing --version (local bases: the new "
                  "directory is swapped in for the old one when complete).")
flags.DEFINE_bool("xla", False, "Keep the element-wise regions XLA-compiled: faster on CPU; "
                  "the model server then needs --xla_cpu_compilation_enabled=true.")
flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16", "float16"],
                  "Compute dtype of the served graph (mixed precision: float32 weights, "
                  "float32 outputs).")
flags.DEFINE_enum("format", "savedmodel", EXPORT_FORMATS, "savedmodel: TF Serving's, with "
                  "the text signatures; onnx / litert: one file of the ids signature.")
flags.DEFINE_enum("quantize", "none", QUANTIZE_MODES, "int8: int8 weights, checked within "
                  f"{INT8_TOLERANCE} relative error of the float model's outputs (savedmodel: "
                  "Keras' quantize('int8'); onnx: the file quantized by ONNX Runtime's dynamic "
                  "quantization, the float file not kept). Not with --format=litert.")
flags.DEFINE_bool("check", False, "Check the SavedModel in a fresh process (tensorflow and "
                  "tensorflow_text only) against the Keras model, one line per signature, "
                  "before it is placed; an existing --version (without --overwrite) is "
                  "checked as it is, nothing written.")
flags.mark_flags_as_required(["model_dir"])
FLAGS = flags.FLAGS


def main(argv):
  del argv
  require(FLAGS.version >= 0, "--version", "a version number >= 0", FLAGS.version)
  require(FLAGS.quantize == "none" or FLAGS.format != "litert", "--quantize",
          "none with --format=litert (int8: --format=savedmodel or onnx)", FLAGS.quantize)
  require(FLAGS.quantize == "none" or FLAGS.dtype == "float32", "--dtype",
          "float32 with --quantize=int8 (int8 weights, float32 activations)", FLAGS.dtype)
  require(not FLAGS.check or FLAGS.format == "savedmodel", "--check",
          "used with --format=savedmodel (an ONNX or LiteRT file is checked against the Keras "
          "model as it is written)", f"--format={FLAGS.format}")
  version_dir = version_directory(FLAGS.export_base, FLAGS.model_name, FLAGS.version)
  check_only = FLAGS.check and not FLAGS.overwrite and files.exists(version_dir)
  # Before the model is read: an export that could not be placed is refused at once.
  if not check_only:
    check_version_free(version_dir, FLAGS.overwrite)
  if FLAGS.format != "savedmodel":
    _export_file()
    return
  if FLAGS.dtype != "float32":
    keras.mixed_precision.set_global_policy(f"mixed_{FLAGS.dtype}")
  place = pretrained_flags.located(FLAGS.model_dir)
  tokenizer = pretrained_flags.tokenizer(place, "model_dir")
  model, labels = _exportable_model(place, tokenizer)
  if check_only:
    if FLAGS.quantize == "int8":
      model.quantize("int8")
    lines = check_saved_model(version_dir, model, tokenizer, labels, xla=FLAGS.xla)
    print(f"Checked {version_dir} against --model_dir={FLAGS.model_dir} (it exists: nothing "
          "written)")
    print("\n".join(lines))
    return
  lines = []

  def check(written):  # the staged export, before it is placed at version_dir
    lines.extend(check_saved_model(written, model, tokenizer, labels, xla=FLAGS.xla,
                                   shown=version_dir))
  try:
    path = export_saved_model(model, tokenizer.sp_path, FLAGS.export_base, FLAGS.model_name,
                              _max_seq_length(place, tokenizer), FLAGS.version,
                              FLAGS.text_pairs, tokenizer.lower, xla=FLAGS.xla, labels=labels,
                              overwrite=FLAGS.overwrite, quantize=FLAGS.quantize,
                              keep_accents=tokenizer.keep_accents,
                              check=check if FLAGS.check else None)
  except Int8CheckError as error:  # the weights, not a bug: one line (without --verbose)
    raise UserInputError(f"{error}; export without --quantize") from None
  print(f"Wrote {path}" + (" (int8)" if FLAGS.quantize == "int8" else "")
        + (", checked in a fresh process:" if lines else ""))
  if lines:
    print("\n".join(lines))


def _max_seq_length(place, tokenizer) -> int:
  """--max_seq_length when given, else the packed length --model_dir's preprocessor.json
  states (what its fine-tuning run read text with), else the flag's default."""
  if not FLAGS["max_seq_length"].present:
    stored = saved_preprocessor(place.directory, tokenizer)
    if stored is not None:
      return stored.sequence_length
  return FLAGS.max_seq_length


def _exportable_model(place, tokenizer):
  """(model, labels or None) from --model_dir (at `place`): an own-format directory as the
  fine-tuning runs write it, or a Hugging Face or original one (a hub id too)."""
  if place.layout == pretrained.OWN:
    return load_exportable_model(place.directory, FLAGS.head, FLAGS.num_classes,
                                 FLAGS.summary_type, FLAGS.task_name, tokenizer.sp_path)
  # Served as fine-tuned: no dropout, no memory (XLNetConfig.for_finetuning).
  options = dict(dropout=0.0, dropatt=0.0, mem_len=0, reuse_len=0, bi_data=False)
  check_vocabulary(tokenizer, pretrained.stored_config(place, options),
                   f"--model_dir={place.name}")
  if FLAGS.head == "backbone":
    return XLNetModel.from_pretrained(pretrained.checkpoint_path(place), **options), None
  given = {name: value for name, value in (("summary_type", FLAGS.summary_type),
                                           ("task_name", FLAGS.task_name))
           if value is not None and name in POOLING_ARGUMENTS.get(FLAGS.head, ())}
  if FLAGS.num_classes is not None and FLAGS.head in CLASS_COUNT:
    given[CLASS_COUNT[FLAGS.head]] = FLAGS.num_classes
  model = pretrained_flags.stored_head(place, EXPORT_HEADS[FLAGS.head], "model_dir",
                                       **given, **options)
  if isinstance(model, XLNetClassifier) and (model.num_classes == 1) != (FLAGS.head ==
                                                                         "regression"):
    raise UserInputError(f"--model_dir={place.name}: {model.num_classes} classes make a "
                         f"{'regression' if model.num_classes == 1 else 'classifier'} head, "
                         f"not --head={FLAGS.head}")
  labels = model.labels if FLAGS.head in ("classifier", "token_classifier") else None
  return model, labels


def _export_file():
  """--format=onnx|litert: float32 plain ops, the ids signature."""
  for flag, value, default in (("xla", FLAGS.xla, False), ("dtype", FLAGS.dtype, "float32"),
                               ("text_pairs", FLAGS.text_pairs, False),
                               ("uncased", FLAGS.uncased, False)):
    require(value == default, f"--{flag}", f"{default} with --format={FLAGS.format} (the file "
            "holds the float32 ids signature, without XLA or a tokenizer)", value)
  place = pretrained_flags.located(FLAGS.model_dir)
  tokenizer = pretrained_flags.tokenizer(place, "model_dir")
  model, labels = _exportable_model(place, tokenizer)
  directory = version_directory(FLAGS.export_base, FLAGS.model_name, FLAGS.version)
  try:
    exported = export_file(model, FLAGS.format, directory, _max_seq_length(place, tokenizer),
                           tokenizer.special_ids.sep, sp_path=tokenizer.sp_path, labels=labels,
                           overwrite=FLAGS.overwrite, quantize=FLAGS.quantize)
  except Int8CheckError as error:  # the weights, not a bug: one line (without --verbose)
    raise UserInputError(f"{error}; export without --quantize") from None
  path, difference = exported[:2]
  if FLAGS.quantize == "none":
    print(f"Wrote {path}; max |difference| from the Keras model on a check batch: "
          f"{difference:.3g}")
    return
  print(f"Wrote {path} (int8); on a check batch, the float file's max |difference| from the "
        f"Keras model: {difference:.3g}, the int8 file's max relative error from the float "
        f"file's outputs: {exported[2]:.3g} (tolerance {INT8_TOLERANCE})")


def entry():
  """The console script (setup.cfg) and run/export.py."""
  cli.run(main, usage=__doc__)
