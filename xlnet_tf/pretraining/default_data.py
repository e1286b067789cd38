"""The embedded default of the pretraining job: corpus, vocabulary and TFRecords, all made at
run time from the Python documentation that ships with Python (nothing is downloaded)."""

import os
from typing import Dict

from xlnet_tf.pretraining import corpus
from xlnet_tf.pretraining.stage import create_pretraining_data
from xlnet_tf.pretraining.examples import PretrainingSettings
from xlnet_tf.pretraining.records import RECORD_INFO_FILE
from xlnet_tf.text.sentencepiece_training import train_sentencepiece


def prepare_default_pretraining_data(directory: str, settings: PretrainingSettings,
                                     vocab_size: int = 2000, seed: int = 0) -> Dict[str, object]:
  """Writes corpus/, spiece.model, train/ and valid/ under `directory` (reused if present).

  Every 10th document is held out for validation. Returns paths and the stage summaries.
  """
  train_dir, valid_dir = os.path.join(directory, "train"), os.path.join(directory, "valid")
  sp_path = os.path.join(directory, "spiece.model")
  result = {"train": train_dir, "valid": valid_dir, "sp_path": sp_path, "reports": []}
  if all(os.path.exists(os.path.join(d, RECORD_INFO_FILE)) for d in (train_dir, valid_dir)):
    return result
  train_docs, valid_docs = corpus.split_held_out(corpus.python_docs_documents(), every=10)
  corpus_dir = os.path.join(directory, "corpus")
  train_files = corpus.write_corpus_files(train_docs, corpus_dir, num_files=4, prefix="train")
  valid_files = corpus.write_corpus_files(valid_docs, corpus_dir, num_files=1, prefix="valid")
  train_sentencepiece(train_files, sp_path[:-len(".model")], vocab_size=vocab_size, seed=seed)
  for files, target, split in ((train_files, train_dir, "train"),
                               (valid_files, valid_dir, "valid")):
    summary = create_pretraining_data(files, sp_path, target, settings, seed=seed, split=split)
    result["reports"].append(f"[{split}] " + summary.report())
  return result
