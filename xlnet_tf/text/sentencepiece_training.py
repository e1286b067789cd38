"""Training a SentencePiece unigram model with XLNet's special symbols.

The original vocabulary puts <unk> 0, <s> 1, </s> 2, then the control symbols <cls> 3,
<sep> 4, <pad> 5, <mask> 6, <eod> 7 and the user-defined <eop> 8 followed by frequent
punctuation pieces, and was trained with character_coverage 0.99995.
"""

import os
import tempfile
from typing import Sequence

import sentencepiece as spm

from xlnet_tf.errors import UserInputError
from xlnet_tf.text.tokenizer import preprocess_text

CONTROL_SYMBOLS = ("<cls>", "<sep>", "<pad>", "<mask>", "<eod>")
USER_DEFINED_SYMBOLS = ("<eop>", ".", "(", ")", '"', "-", "\u2013", "\u00a3", "\u20ac")


def train_sentencepiece(input_files: Sequence[str], model_prefix: str, vocab_size: int = 32000,
                        uncased: bool = False, keep_accents: bool = False,
                        character_coverage: float = 0.99995,
                        input_sentence_size: int = 10_000_000, seed: int = 0) -> str:
  """Trains on the text as XLNetTokenizer will see it (the same preprocessing). Returns the
  .model path."""
  if not input_files:
    raise UserInputError("train_sentencepiece: no input files")
  directory = os.path.dirname(os.path.abspath(model_prefix))
  os.makedirs(directory, exist_ok=True)
  with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", dir=directory,
                                   delete=False) as text:
    lines = 0
    for path in input_files:
      with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
          cleaned = preprocess_text(line, lower=uncased, keep_accents=keep_accents)
          if cleaned:
            text.write(cleaned + "\n")
            lines += 1
  try:
    if lines == 0:
      raise UserInputError(f"train_sentencepiece: the input files {list(input_files)[:3]} hold no "
                           "text")
    spm.set_random_generator_seed(seed)  # with one thread, training is reproducible
    spm.SentencePieceTrainer.train(
        input=text.name, model_prefix=model_prefix, vocab_size=vocab_size,
        model_type="unigram", character_coverage=character_coverage,
        control_symbols=list(CONTROL_SYMBOLS), user_defined_symbols=list(USER_DEFINED_SYMBOLS),
        shuffle_input_sentence=True, input_sentence_size=input_sentence_size,
        hard_vocab_limit=False,  # a small corpus gets the largest vocabulary it supports
        num_threads=1, minloglevel=2)
  finally:
    os.remove(text.name)
  model_path = model_prefix + ".model"
  _clear_training_paths(model_path)
  return model_path


def _clear_training_paths(model_path: str) -> None:
  """Removes the paths the trainer records in the model's trainer_spec (its input, here a
  temporary file with a random name, and model_prefix): they say where training ran, not what
  the model is, and made two trainings on the same text differ in bytes. Rewritten through
  sentencepiece's own model proto (sentencepiece_model_pb2, shipped in the package); pieces,
  scores and every other setting stay as trained."""
  from sentencepiece import sentencepiece_model_pb2
  model = sentencepiece_model_pb2.ModelProto()
  with open(model_path, "rb") as handle:
    model.ParseFromString(handle.read())
  model.trainer_spec.ClearField("input")
  model.trainer_spec.ClearField("model_prefix")
  with open(model_path, "wb") as handle:
    handle.write(model.SerializeToString(deterministic=True))
