"""Pretraining, fine-tuning and export with every path on TensorFlow's in-memory file system.

ram:// lives in one process, so the three command-line tools run here one after another, each
through its console entry as a user runs it (xlnet-pretrain, xlnet-classifier, xlnet-export),
their flags removed between them. tests/test_remote_paths.py runs this in a forked child in an
empty working directory, which must stay empty. Prints the ram:// tree as one JSON line:
`TREE {"path": size, ...}`.

  remote_paths_run.py ROOT TEMPORARY   (e.g. ram://remote-run; the temporary directory to use)
"""

import csv
import importlib
import io
import json
import sys
import tempfile

from absl import flags

from xlnet_tf.utils import cli  # noqa: F401  (its --verbose stays defined across the tools)
from xlnet_tf.utils import files

ROOT = sys.argv[1].rstrip("/")
tempfile.tempdir = sys.argv[2]  # what the run leaves there is checked
FLAGS = flags.FLAGS
_BASE_FLAGS = set(FLAGS)

TEXTS = [("a fine film with a fine cast", "pos"), ("a dull film that goes on and on", "neg"),
         ("the best play of the year", "pos"), ("the worst book of the year", "neg")]


def run(tool, *arguments):
  """Runs xlnet_tf.cli.`tool`'s console entry with `arguments`; the flags of the tool before it
  are removed first (each tool defines its own, some under the same names)."""
  for name in set(FLAGS) - _BASE_FLAGS:
    delattr(FLAGS, name)
  FLAGS.unparse_flags()
  module = importlib.import_module(f"xlnet_tf.cli.{tool}")
  sys.argv = [tool, *arguments]
  try:
    module.entry()
  except SystemExit as exit:
    if exit.code not in (0, None):
      raise RuntimeError(f"{tool} {' '.join(arguments)}: exit status {exit.code}") from None


def write_inputs():
  from xlnet_tf.pretraining.data import corpus
  corpus.write_corpus_files(corpus.python_docs_documents()[:12], f"{ROOT}/text", num_files=2)
  table = io.StringIO()
  writer = csv.writer(table)
  writer.writerow(["text", "label"])
  writer.writerows(TEXTS)
  files.write_text(f"{ROOT}/task/train.csv", table.getvalue())


def main():
  write_inputs()
  run("pretrain", f"--input_glob={ROOT}/text/*.txt", f"--output_dir={ROOT}/pretrain",
      "--model_size=tiny", "--vocab_size=300", "--seq_len=16", "--reuse_len=8",
      "--num_predict=3", "--bsz_per_host=2", "--train_steps=2", "--save_steps=2", "--log_steps=1",
      "--eval_batches=1", "--nojit_compile")
  run("classifier", "--task_name=generic", f"--init_checkpoint={ROOT}/pretrain/model/pretrained",
      f"--sp_path={ROOT}/pretrain/data/spiece.model",
      f"--train_file={ROOT}/task/train.csv", f"--dev_file={ROOT}/task/train.csv",
      f"--test_file={ROOT}/task/train.csv", f"--output_dir={ROOT}/finetune",
      "--max_seq_length=16", "--train_batch_size=2", "--train_steps=2", "--eval_every=2",
      "--do_train", "--do_predict", "--progress=none", "--nojit_compile")
  run("export", f"--model_dir={ROOT}/finetune/best", f"--export_base={ROOT}/serving",
      f"--sp_path={ROOT}/pretrain/data/spiece.model",
      "--model_name=tiny", "--max_seq_length=16")
  print("TREE " + json.dumps(tree(ROOT)))


def tree(root):
  """{path: size} of every file under `root`. ram:// lists a folder's children by name prefix
  (ram://x/train also lists ram://x/train_history.json as _history.json): names that are not
  there are left out."""
  found = {}
  for directory, _, names in files.walk(root):
    for name in names:
      path = files.join(directory, name)
      if files.isfile(path):
        found[path] = files.getsize(path)
  return found


if __name__ == "__main__":
  main()
