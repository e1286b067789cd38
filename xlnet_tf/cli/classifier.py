r"""Fine-tunes XLNet for sequence classification or regression (GLUE or your own files).

  python run/classifier.py --train_file=train.csv --init_checkpoint=xlnet/xlnet-base-cased \
      --output_dir=out/mine

trains on your own file (the generic task: a text column and a label column, CSV, TSV or
JSONL) for 3 epochs (--num_train_epochs, or --train_steps); --dev_file and --test_file add
evaluation and predictions. A GLUE task, with every setting of the paper's recipe:

  python run/classifier.py --task_name=sts-b --data_dir=glue/STS-B \
      --init_checkpoint=xlnet_cased_L-24_H-1024_A-16 --max_seq_length=128 --train_batch_size=32 \
      --train_steps=1200 --learning_rate=5e-5 --warmup_steps=120 --output_dir=out/sts-b \
      --do_train --do_eval --do_predict

Multi-label (a set of labels per row, `sports|politics` in the label column):
  python run/classifier.py --multi_label --train_file=train.tsv --dev_file=dev.tsv \
      --test_file=test.tsv ...
trains one sigmoid per label (binary cross-entropy), keeps the weights with the best dev
micro-F1, tunes each label's threshold on dev (thresholds.json beside the weights) and writes
each test row's label set.

Long documents: --max_segments=4 --mem_len=384 reads each text (or pair) as 4 consecutive
segments of --max_seq_length=128 tokens with Transformer-XL memory (xlnet_tf.text.packing: the
layout; the last segment's <cls> decides, attending to all three segments before it). Runs
without --do_train and run/export.py take both from the training run's best/ (head.json,
xlnet_config.json).
"""

import os

from absl import app
from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.checkpoints.labels import saved_thresholds
from xlnet_tf.utils.json_files import write_json
from xlnet_tf.tasks import classification, finetuning, long_documents
from xlnet_tf.tasks.classification.readers import GLUE_TASKS

from xlnet_tf.cli import common_flags

flags.DEFINE_enum("task_name", None, sorted(GLUE_TASKS) + ["imdb", classification.GENERIC_TASK],
                  "GLUE task, imdb (aclImdb folders) or generic (default: generic with "
                  "--train_file, --dev_file or --test_file).")
flags.DEFINE_string("data_dir", None, "GLUE task directory (train.tsv, dev.tsv, test.tsv) or "
                    "the aclImdb directory.")
flags.DEFINE_string("train_file", None, "generic: CSV/TSV (with a header) or JSONL: the text "
                    "column(s) and label.")
flags.DEFINE_string("dev_file", None, "generic: evaluation file.")
flags.DEFINE_string("test_file", None, "generic: prediction file.")
flags.DEFINE_list("labels", None, "generic: the label set, in order (rows with other labels "
                  "are skipped). Default: the training file's labels, sorted, saved as "
                  "labels.json beside the best weights; a run without --do_train reads them "
                  "back, and a dev/test label outside them is an error.")
flags.DEFINE_list("text_columns", None, "generic: the text column(s), text_a[,text_b]. Default: "
                  "the first pair of text/text_b, text_a/text_b, sentence1/sentence2, "
                  "premise/hypothesis, question1/question2, question/sentence, "
                  "question/passage present, else text, text_a or sentence.")
flags.DEFINE_bool("regression", False, "generic: real-valued labels.")
flags.DEFINE_bool("multi_label", False, "generic: each row has a set of labels, separated by "
                  "--label_delimiter in its label column (one sigmoid per label; metrics "
                  "micro/macro F1; thresholds tuned per label on dev).")
flags.DEFINE_string("label_delimiter", "|", "--multi_label: the separator of a row's labels "
                    "(e.g. 'sports|politics'; '|' needs no quoting in CSV or TSV).")
flags.DEFINE_bool("mnli_mismatched", False, "mnli: evaluate/predict on the mismatched sets.")
flags.DEFINE_enum("summary_type", "last", ["last", "first", "mean", "attn"], "Pooling.")
flags.DEFINE_float("weight_decay", 0.0, "AdamW weight decay.")
flags.DEFINE_float("dropout", 0.1, "Dropout.")
flags.DEFINE_float("dropatt", 0.1, "Attention dropout.")
flags.DEFINE_bool("jit_compile", True, "XLA.")
flags.DEFINE_integer("max_segments", 1, "Long documents: each text (or pair) is read as this "
                     "many consecutive segments of --max_seq_length tokens, with memory "
                     "(needs --mem_len); 1 = one sequence, truncated. Without --do_train: the "
                     "training run's (best/head.json).")
flags.DEFINE_integer("mem_len", 0, "Memory (positions) each segment reads of the ones before "
                     "(with --max_segments > 1; (max_segments - 1) x --max_seq_length lets the "
                     "last segment attend to every earlier one). "
                     "Without --do_train: the training run's (best/xlnet_config.json).")
common_flags.define_finetuning_flags(implying_files={
    "do_train": "train_file", "do_eval": "dev_file", "do_predict": "test_file"})
flags.mark_flags_as_required(["output_dir"])
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if FLAGS["label_delimiter"].present and not FLAGS.multi_label:
    raise app.UsageError("--label_delimiter needs --multi_label (it separates a row's labels)")
  FLAGS.task_name = classification.task_name_for(FLAGS.task_name, split_files())
  common_flags.imply_actions()
  strategy, tokenizer, config, options, pretrained = common_flags.finetuning_setup(
      dropout=FLAGS.dropout, dropatt=FLAGS.dropatt)
  best_dir = common_flags.best_dir()
  segments = long_documents.run_settings(
      *[FLAGS[name].value if FLAGS[name].present else None for name in ("max_segments",
                                                                          "mem_len")],
      trained_in=None if FLAGS.do_train else best_dir)
  long_documents.check_attention_size(segments, config, FLAGS.max_seq_length,
                                      FLAGS.train_batch_size)
  config = config.for_finetuning(mem_len=segments.mem_len)
  # Training evaluates on dev when there is one (a generic task may have no dev file).
  has_dev = FLAGS.task_name != classification.GENERIC_TASK or FLAGS.dev_file
  splits = [s for s, wanted in (("train", FLAGS.do_train), ("dev", FLAGS.do_eval or (
      FLAGS.do_train and has_dev)), ("test", FLAGS.do_predict)) if wanted]
  task = classification.load_task(task_data_options(segments.max_segments, best_dir),
                                  tokenizer, splits)
  for split, report in task.reports.items():
    print(f"{task.name} {split}: {report.summary()}")
  if task.labels is not None:
    print(f"{task.name}: {len(task.labels)} labels from {task.label_origin}: "
          f"{', '.join(task.labels)}")
  if FLAGS.do_train:
    options = common_flags.training_length(options, len(task.splits["train"]["label"]))
  with strategy.scope():
    model = classification.build_classifier(config, task, FLAGS.summary_type,
                                            pretrained.checkpoint, pretrained.checkpoint_format,
                                            segments.max_segments)
    common_flags.apply_memory_flags(model.backbone)
    if FLAGS.do_train:
      result = classification.train_classifier(model, task, options, best_dir)
      write_json(os.path.join(FLAGS.output_dir, "train_history.json"), result)
      if result["best"]:
        print(f"Best dev {result['metric']}: {result['best'][result['metric']]:.4f} at step "
              f"{result['best']['step']}; weights in {best_dir}")
    else:
      finetuning.restore_best(model, best_dir)
    thresholds = saved_thresholds(best_dir, task.labels) if task.multi_label else None
    if FLAGS.do_eval:
      logits = classification.predict_logits(model, task.splits["dev"], FLAGS.train_batch_size)
      metrics = classification.task_metrics(task, task.splits["dev"]["label"], logits,
                                            thresholds)
      write_json(os.path.join(FLAGS.output_dir, "dev_metrics.json"), metrics)
      print(f"dev: {metrics}")
    if FLAGS.do_predict:
      logits = classification.predict_logits(model, task.splits["test"], FLAGS.train_batch_size)
      path = os.path.join(FLAGS.output_dir, f"{task.name}_test_predictions.tsv")
      classification.write_predictions(path, task, logits, thresholds)
      print(f"Wrote {len(logits)} predictions to {path}")


def task_data_options(max_segments: int, best_dir: str) -> classification.TaskDataOptions:
  """Where and how the task's files are read, from the flags; a run without --do_train finds
  the label order in `best_dir`."""
  return classification.TaskDataOptions(
      FLAGS.task_name, data_dir=FLAGS.data_dir, files=split_files(), labels=FLAGS.labels,
      regression=FLAGS.regression, mnli_mismatched=FLAGS.mnli_mismatched,
      text_columns=FLAGS.text_columns, model_dir=best_dir, multi_label=FLAGS.multi_label,
      label_delimiter=FLAGS.label_delimiter, max_seq_length=FLAGS.max_seq_length,
      max_segments=max_segments)


def split_files():
  """{split: --train_file, --dev_file, --test_file}: a generic task's files."""
  return {"train": FLAGS.train_file, "dev": FLAGS.dev_file, "test": FLAGS.test_file}


def entry():
  """The console script (setup.cfg) and run/classifier.py."""
  cli.run(main, usage=__doc__)
