"""Training a SentencePiece unigram model with XLNet's special symbols.

The original vocabulary puts <unk> 0, <s> 1, </s> 2, then the control symbols <cls> 3,
<sep> 4, <pad> 5, <mask> 6, <eod> 7 and the user-defined <eop> 8 followed by frequent
punctuation pieces, and was trained with character_coverage 0.99995.
"""

import io
import os
import re
from typing import Callable, Iterator, List, Optional, Sequence

import sentencepiece as spm
from absl import logging

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.temporary_folders import temporary_folder
from xlnet_tf.text.tokenizer import preprocess_text

CONTROL_SYMBOLS = ("<cls>", "<sep>", "<pad>", "<mask>", "<eod>")
USER_DEFINED_SYMBOLS = ("<eop>", ".", "(", ")", '"', "-", "\u2013", "\u00a3", "\u20ac")
# SentencePiece's trainer drops longer sentences without a word (and fails when all are).
MAX_SENTENCE_BYTES = 4192
WORK_FOLDER_PREFIX = ".sentencepiece-"  # beside the model; see temporary_folders


def train_sentencepiece(input_files: Sequence[str], model_prefix: str, vocab_size: int = 32000,
                        uncased: bool = False, keep_accents: bool = False,
                        character_coverage: float = 0.99995,
                        input_sentence_size: int = 10_000_000, seed: int = 0,
                        report: Callable[[str], None] = logging.warning,
                        inputs_named: Optional[str] = None) -> str:
  """Trains a SentencePiece model with XLNet's symbols on the text as XLNetTokenizer sees it.

  The text is cleaned with the tokenizer's preprocessing (preprocess_text); the model is a
  unigram one with XLNet's symbols (CONTROL_SYMBOLS, USER_DEFINED_SYMBOLS). Lines that are
  not valid UTF-8 are skipped (counted in a line to `report`); a file with a NUL byte is not
  text (an error naming it). Lines longer than MAX_SENTENCE_BYTES are cut at
  spaces, which no piece crosses, so that the trainer sees them. The vocabulary limit is soft
  (hard_vocab_limit=False): a text too small for `vocab_size` pieces gets the largest vocabulary
  it supports, and `report` gets a line saying how many pieces it got. The .model and .vocab
  files appear only when complete (built in a temporary folder beside them; for a remote
  `model_prefix`, gs://...: a local temporary folder, since SentencePiece reads a local file,
  then copied there through utils.files). A write that fails (a full disk) is an OSError
  naming `<model_prefix>.model`. Input files may be remote too.

  Args:
    input_files: the text files, one sentence per line.
    model_prefix: where to write `<model_prefix>.model` and `<model_prefix>.vocab`.
    vocab_size: the pieces wanted (a soft limit, see above).
    uncased: lower-case the text (for an uncased tokenizer: XLNetTokenizer's lower).
    keep_accents: keep accents (XLNetTokenizer's keep_accents).
    character_coverage: SentencePiece's share of the characters the pieces must cover.
    input_sentence_size: the most lines SentencePiece samples to train on.
    seed: SentencePiece's random seed (training on one thread is then reproducible).
    report: called with a line about lines skipped or a smaller vocabulary.
    inputs_named: how the message of a text SentencePiece cannot train on names it (default:
      the input files), for input files written from the user's own.

  Returns:
    The path of the .model file.

  Raises:
    UserInputError: for no input files, no text, a file holding a NUL byte (not text), or a
      text SentencePiece cannot train on.
    OSError: naming `<model_prefix>.model` when a write fails (a full disk).
  """
  if not input_files:
    raise UserInputError("train_sentencepiece: no input files")
  directory = os.path.dirname(files.absolute(model_prefix))
  model_path = model_prefix + ".model"
  with temporary_folder(directory, WORK_FOLDER_PREFIX, report) as work_dir:
    text_path = os.path.join(work_dir, "text.txt")
    skipped = _write_training_text(input_files, text_path, uncased, keep_accents, model_path)
    if skipped:
      report(f"Skipped {len(skipped)} lines that are not valid UTF-8, e.g. "
             f"{', '.join(skipped[:3])}")
    if os.path.getsize(text_path) == 0:
      raise UserInputError(f"train_sentencepiece: the input files {list(input_files)[:3]} hold "
                           "no text")
    work_prefix = os.path.join(work_dir, os.path.basename(model_prefix))
    spm.set_random_generator_seed(seed)  # with one thread, training is reproducible
    # The trainer's own writes of the .model and .vocab go unchecked: on a full disk it left a
    # model cut short and reported success. It hands the model over instead, and the files are
    # written here, where a failed write raises.
    trained = io.BytesIO()
    try:
      spm.SentencePieceTrainer.train(
          input=text_path, vocab_size=vocab_size,
          model_type="unigram", character_coverage=character_coverage,
          control_symbols=list(CONTROL_SYMBOLS), user_defined_symbols=list(USER_DEFINED_SYMBOLS),
          shuffle_input_sentence=True, input_sentence_size=input_sentence_size,
          max_sentence_length=MAX_SENTENCE_BYTES,
          hard_vocab_limit=False,  # a small corpus gets the largest vocabulary it supports
          num_threads=1, minloglevel=2, model_writer=trained)
    except RuntimeError as error:  # SentencePiece's message, without its source location
      reason = re.sub(r"^\S+: \S+\(\d+\) \[.*?\] ", "", str(error).strip())
      named = inputs_named or list(input_files)[:3]
      raise UserInputError(f"SentencePiece cannot train on {named} with "
                           f"vocab_size={vocab_size:,}: {reason}") from None
    # A failed write (a full disk) names the model asked for, not the work folder's file.
    with files.named_on_failure(model_path):
      with open(work_prefix + ".model", "wb") as handle:
        handle.write(trained.getvalue())
      _clear_training_paths(work_prefix + ".model")
      pieces = _write_vocabulary(work_prefix + ".model", work_prefix + ".vocab")
    files.makedirs(directory)  # made by temporary_folder when local; a remote one may lack it
    for suffix in (".vocab", ".model"):  # the model last: it is what tools look for
      files.move(work_prefix + suffix, model_prefix + suffix)
  if pieces < vocab_size:
    report(f"{model_path}: {pieces:,} pieces, fewer than the {vocab_size:,} asked (vocab_size): "
           "the text supports no more; train on more text for a larger vocabulary")
  return model_path


def _write_training_text(input_files: Sequence[str], text_path: str, uncased: bool,
                         keep_accents: bool, written_for: str) -> List[str]:
  """Writes the preprocessed lines, long ones cut (`_sentences`); returns the `path:line` of
  the lines skipped as not UTF-8. A failed write names `written_for` (the model the text is
  for, rather than the work folder's file); a failed read names its input file."""
  skipped = []
  with files.named_on_failure(written_for), open(text_path, "w", encoding="utf-8") as text:
    for path in input_files:
      for number, raw in enumerate(_lines(path), start=1):
        if b"\0" in raw:
          raise UserInputError(f"{path}:{number}: a NUL byte: not a text file (train on UTF-8 "
                               "text, one sentence per line)")
        try:
          line = raw.decode("utf-8")
        except UnicodeDecodeError:
          skipped.append(f"{path}:{number}")
          continue
        cleaned = preprocess_text(line, lower=uncased, keep_accents=keep_accents)
        for sentence in _sentences(cleaned, MAX_SENTENCE_BYTES):
          text.write(sentence + "\n")
  return skipped


def _lines(path: str) -> Iterator[bytes]:
  """The lines of the input file `path`; a failed read names it (the error is raised in this
  generator, so the writes of its caller are not named after it)."""
  with files.named_on_failure(path), files.open_file(path, "rb") as handle:
    yield from handle


def _sentences(text: str, max_bytes: int) -> Iterator[str]:
  """`text` (words separated by single spaces) in pieces of at most max_bytes UTF-8 bytes, cut
  at spaces; a longer word every max_bytes // 4 characters."""
  if len(text.encode("utf-8")) <= max_bytes:
    if text:
      yield text
    return
  words, size = [], 0
  for word in text.split(" "):
    length = len(word.encode("utf-8")) + 1
    if words and size + length > max_bytes:
      yield " ".join(words)
      words, size = [], 0
    if length > max_bytes:
      step = max_bytes // 4  # a character is at most 4 bytes
      yield from (word[start:start + step] for start in range(0, len(word), step))
      continue
    words.append(word)
    size += length
  if words:
    yield " ".join(words)


def _write_vocabulary(model_path: str, vocabulary_path: str) -> int:
  """Writes the .vocab file the trainer writes beside a model (each piece and its score, as
  C++'s stream prints a float: 6 significant digits); returns the number of pieces."""
  from sentencepiece import sentencepiece_model_pb2
  model = sentencepiece_model_pb2.ModelProto()
  with open(model_path, "rb") as handle:
    model.ParseFromString(handle.read())
  with open(vocabulary_path, "w", encoding="utf-8", newline="\n") as handle:
    handle.writelines(f"{piece.piece}\t{piece.score:g}\n" for piece in model.pieces)
  return len(model.pieces)


def _clear_training_paths(model_path: str) -> None:
  """Removes the paths the trainer records in the model's trainer_spec (its input, here a
  temporary file with a random name; model_prefix, when it wrote the file itself): they say
  where training ran, not what the model is, and made two trainings on the same text differ
  in bytes. Rewritten through
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
