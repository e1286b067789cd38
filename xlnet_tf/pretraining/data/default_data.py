"""Pretraining data from raw text in one call: held-out split, SentencePiece model, TFRecords.

`prepare_pretraining_data` is what `run/pretrain.py --input_glob=...` runs before training, and
with the Python documentation that ships with Python (nothing downloaded) it is the main job's
embedded default (`prepare_default_pretraining_data`).
"""

import os
from typing import Dict, List, Sequence

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.pretraining.data import corpus
from xlnet_tf.pretraining.data.stage import create_pretraining_data
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.pretraining.data.records import RECORD_INFO_FILE
from xlnet_tf.text.sentencepiece_training import train_sentencepiece


def read_text_files(paths: Sequence[str]) -> List[corpus.Document]:
  """Documents of the files (one sentence a line, a blank line between documents); lines that
  are not UTF-8 are counted skips (corpus.read_documents)."""
  if not paths:
    raise UserInputError("No input text files (check --input_glob)")
  documents, stats = [], corpus.ReadStats()
  for path in sorted(paths):
    if not files.isfile(path):
      raise FileNotFoundError(f"{path}: input file not found")
    documents.extend(corpus.read_documents(path, stats))
  if not documents:
    raise UserInputError(f"The input files hold no text: {sorted(paths)[:3]}")
  return documents


def prepare_pretraining_data(documents: List[corpus.Document], directory: str,
                             settings: PretrainingDataConfig, vocab_size: int = 2000,
                             seed: int = 0, held_out_every: int = 10,
                             num_files: int = 4) -> Dict[str, object]:
  """Writes corpus/, spiece.model, train/ and valid/ under `directory` (reused if present).

  Every `held_out_every`-th document is held out for validation; the training documents are
  written as `num_files` files (the stage's unit of parallelism). Returns paths and the stage
  summaries.
  """
  train_dir, valid_dir = os.path.join(directory, "train"), os.path.join(directory, "valid")
  sp_path = os.path.join(directory, "spiece.model")
  result = {"train": train_dir, "valid": valid_dir, "sp_path": sp_path, "reports": []}
  if all(files.exists(os.path.join(d, RECORD_INFO_FILE)) for d in (train_dir, valid_dir)):
    return result
  train_docs, valid_docs = corpus.split_held_out(documents, every=held_out_every)
  corpus_dir = os.path.join(directory, "corpus")
  train_files = corpus.write_corpus_files(train_docs, corpus_dir, num_files=num_files,
                                          prefix="train")
  valid_files = corpus.write_corpus_files(valid_docs, corpus_dir, num_files=1, prefix="valid")
  if not files.exists(sp_path):
    train_sentencepiece(train_files, sp_path[:-len(".model")], vocab_size=vocab_size,
                        uncased=settings.uncased, seed=seed)
  for inputs, target, split in ((train_files, train_dir, "train"),
                                (valid_files, valid_dir, "valid")):
    summary = create_pretraining_data(inputs, sp_path, target, settings, seed=seed, split=split)
    result["reports"].append(f"[{split}] " + summary.report())
  return result


def prepare_default_pretraining_data(directory: str, settings: PretrainingDataConfig,
                                     vocab_size: int = 2000, seed: int = 0) -> Dict[str, object]:
  """The main job's data: the Python reference documentation (pydoc_data)."""
  return prepare_pretraining_data(corpus.python_docs_documents(), directory, settings,
                                  vocab_size, seed)
