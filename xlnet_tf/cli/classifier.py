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

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.tasks.classification import (GENERIC_TASK, ClassificationOptions,
                                           ClassificationTask)
from xlnet_tf.tasks.classification.readers import GLUE_TASKS

from xlnet_tf.cli import common_flags

flags.DEFINE_enum("task_name", None, sorted(GLUE_TASKS) + ["imdb", GENERIC_TASK],
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
# {flag: the field of ClassificationOptions it sets}, besides every fine-tuning tool's.
FLAG_FIELDS = {
    **{name: name for name in (
        "task_name", "data_dir", "train_file", "dev_file", "test_file", "labels",
        "text_columns", "regression", "multi_label", "label_delimiter", "mnli_mismatched",
        "summary_type", "dropout", "dropatt", "max_segments", "mem_len")},
    "weight_decay": "finetuning.optimizer.weight_decay", "jit_compile": "finetuning.jit_compile"}
PATH_FLAGS = ("data_dir", "train_file", "dev_file", "test_file")
# Their defaults mean "not given": the training run's (best/), or "|" with --multi_label.
PRESENT_ONLY = ("max_segments", "mem_len", "label_delimiter")


def main(argv):
  del argv
  common_flags.imply_actions()
  options = common_flags.task_options(ClassificationOptions, FLAG_FIELDS, PATH_FLAGS,
                                      PRESENT_ONLY)
  common_flags.run(ClassificationTask(options), FLAG_FIELDS)


def entry():
  """The console script (setup.cfg) and run/classifier.py."""
  cli.run(main, usage=__doc__)
