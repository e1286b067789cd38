"""Pretraining data from raw text in one call: held-out split, SentencePiece model, TFRecords.

`prepare_pretraining_data` is what `run/pretrain.py --input_glob=...` runs before training, and
with the Python documentation that ships with Python (nothing downloaded) it is the main job's
embedded default (`prepare_default_pretraining_data`).

How the text is split (one line of the reports says which way it went):
  - 1 of every `held_out_every` documents is held out, when the text has that many documents
    and each part holds a batch;
  - else the text's end is held out (1 / held_out_every of it, and at least one batch), cut at
    a line: a text of one document (no blank line) or of a few, or whose held-out documents
    are too short;
  - a text with room for one batch only is all trained on, without held-out evaluation;
  - a text too small for one batch is refused, naming it (`source`), as are the stage's own
    failures to write a training example: a message never names the files written here.

The data record what they were made for (REQUEST_FILE): a later call for the same settings
and text reuses them, one for others makes them again (`request_differences` tells a caller
what differs first, e.g. to refuse where a model was trained on the data).
"""

import os
import platform
from typing import Dict, List, Optional, Sequence, Tuple

from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import read_json_object, write_json
from xlnet_tf.pretraining.data import corpus
from xlnet_tf.pretraining.data.rows import example_span, stream_count
from xlnet_tf.pretraining.data.stage import NoExampleWritten, create_pretraining_data
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.pretraining.data.records import RECORD_INFO_FILE
from xlnet_tf.text.sentencepiece_training import train_sentencepiece
from xlnet_tf.text.tokenizer import XLNetTokenizer

# Written last into the data directory: what the data were made for, and how the text was split.
REQUEST_FILE = "made_for.json"
# Lines tokenized at a time when counting whether a part of the text holds enough tokens.
_COUNTING_LINES = 2000


def read_text_files(paths: Sequence[str]) -> List[corpus.Document]:
  """Documents of the files (one sentence a line, a blank line between documents); lines that
  are not UTF-8 are counted skips (corpus.read_documents)."""
  if not paths:
    raise UserInputError("No input text files (check --input_glob)")
  documents, stats = [], corpus.ReadStats()
  for path in sorted(paths):
    if not files.isfile(path):
      raise FileNotFoundError(f"{path}: input file not found")
    read = corpus.read_documents(path, stats)
    if any("\0" in line for document in read for line in document):
      raise UserInputError(f"{path}: a NUL byte: not a text file (pretrain on UTF-8 text, one "
                           "sentence a line)")
    documents.extend(read)
  if not documents:
    raise UserInputError(f"The input files hold no text: {sorted(paths)[:3]}")
  return documents


def text_fingerprint(paths: Sequence[str]) -> List[List]:
  """What identifies the input files for a later reuse of the data: each path and size."""
  return [[files.absolute(path), files.getsize(path)] for path in sorted(paths)]


def tokens_for_one_batch(settings: PretrainingDataConfig) -> int:
  """Tokens a file needs for one batch of examples, with room to spare: each of its streams
  (`rows.stream_count`) a sequence, and half a sequence more, as an example's second part
  ends at a sentence boundary past the sequence's end."""
  return stream_count(settings) * (example_span(settings) + settings.seq_len // 2)


def data_request(settings: PretrainingDataConfig, vocab_size: int, seed: int,
                 held_out_every: int, inputs: Optional[list] = None) -> Dict:
  """What data made by `prepare_pretraining_data` depend on (inputs: `text_fingerprint`)."""
  request = {"settings": settings.to_dict(), "vocab_size": vocab_size, "seed": seed,
             "held_out_every": held_out_every}
  if inputs is not None:
    request["inputs"] = inputs
  return request


def made_for(directory: str) -> Optional[Dict]:
  """{"request", "held_out", "split"} of the complete data in `directory`; for complete data
  made before REQUEST_FILE was written, their settings and seed (the training record info);
  None where there are none."""
  train_info = os.path.join(directory, "train", RECORD_INFO_FILE)
  valid_info = os.path.join(directory, "valid", RECORD_INFO_FILE)
  request_file = os.path.join(directory, REQUEST_FILE)
  if not files.exists(train_info):
    return None
  if files.exists(request_file):
    made = read_json_object(request_file)
    if made.get("held_out") and not files.exists(valid_info):
      return None
    return made
  if not files.exists(valid_info):
    return None
  info = read_json_object(train_info)
  return {"request": {"settings": info.get("settings"), "seed": info.get("seed")},
          "held_out": True}


def request_differences(directory: str, request: Dict) -> Dict[str, Tuple]:
  """{name: (made for, asked)} of what the complete data in `directory` were made for
  otherwise than `request` (data_request): the data stage's settings by their field names,
  vocab_size, seed, held_out_every and inputs, each where both record it; {} without data."""
  made = made_for(directory)
  if made is None:
    return {}
  return _differences(made["request"], request)


def _differences(made: Dict, asked: Dict) -> Dict[str, Tuple]:
  flat_made = {**{k: v for k, v in made.items() if k != "settings"}, **(made.get("settings") or {})}
  flat_asked = {**{k: v for k, v in asked.items() if k != "settings"}, **asked["settings"]}
  return {name: (flat_made[name], value) for name, value in flat_asked.items()
          if name in flat_made and flat_made[name] != value}


def describe_differences(changed: Dict[str, Tuple], names: Optional[Dict[str, str]] = None
                         ) -> str:
  """`request_differences` as words: "seq_len 128 (now 64), ..."; `names` maps a setting to
  what sets it (a flag) where that is not the setting's own name."""
  names = names or {}
  return ", ".join(f"other text ({names.get(name, name)}: the files or their sizes differ)"
                   if name == "inputs" else
                   f"{names.get(name, name)} {made} (now {asked})"
                   for name, (made, asked) in changed.items())


def prepare_pretraining_data(documents: List[corpus.Document], directory: str,
                             settings: PretrainingDataConfig, vocab_size: int = 2000,
                             seed: int = 0, held_out_every: int = 10, num_files: int = 4,
                             source: str = "the input text",
                             inputs: Optional[list] = None) -> Dict[str, object]:
  """Writes corpus/, spiece.model, train/, valid/ and REQUEST_FILE under `directory`; reuses
  complete data made for the same request (data_request), makes data for another one again.

  The text is split as the module docstring says; the training documents are written as up to
  `num_files` files (the stage's unit of parallelism; fewer for a text too small to give each
  a batch). `source` names the text in messages (a flag, the user's files). Returns the paths
  ("valid": None without held-out data) and the report lines: the split's, then the stages'.
  """
  train_dir, valid_dir = os.path.join(directory, "train"), os.path.join(directory, "valid")
  sp_path = os.path.join(directory, "spiece.model")
  result = {"train": train_dir, "valid": valid_dir, "sp_path": sp_path, "reports": []}
  request = data_request(settings, vocab_size, seed, held_out_every, inputs)
  made = made_for(directory)
  if made is not None:
    changed = _differences(made["request"], request)
    if not changed:
      if not made["held_out"]:
        result["valid"] = None
      return result
    result["reports"].append(f"Making {directory} again: it was made for "
                             f"{describe_differences(changed)}.")
  _remove_made_data(directory)
  corpus_dir = os.path.join(directory, "corpus")
  split = _split_with_tokenizer(documents, settings, vocab_size, seed, held_out_every, source,
                                corpus_dir, sp_path, num_files)
  result["reports"].append(split.description)
  need = tokens_for_one_batch(settings)
  tokenizer = XLNetTokenizer(sp_path, lower=settings.uncased)
  enough_for_each = _tokens_at_least(tokenizer, split.train, settings, num_files * need)
  train_files = corpus.write_corpus_files(
      split.train, corpus_dir, prefix="train",
      num_files=max(1, min(num_files, len(split.train), enough_for_each // need)))
  try:
    summary = create_pretraining_data(train_files, sp_path, train_dir, settings, seed=seed,
                                      split="train")
  except NoExampleWritten as error:
    raise _too_little_text(source, f"{error.tokens:,} tokens", settings) from None
  result["reports"].append("[train] " + summary.report())
  held_out = bool(split.held_out)
  if held_out:
    valid_files = corpus.write_corpus_files(split.held_out, corpus_dir, num_files=1,
                                            prefix="valid")
    try:
      summary = create_pretraining_data(valid_files, sp_path, valid_dir, settings, seed=seed,
                                        split="valid")
      result["reports"].append("[valid] " + summary.report())
    except NoExampleWritten:
      held_out = False
      result["reports"].append(
          f"No held-out evaluation: the held-out text gives no batch of {settings.bsz_per_host} "
          f"rows x {settings.seq_len} tokens; give more text for a held-out loss.")
  if not held_out:
    result["valid"] = None
  write_json(os.path.join(directory, REQUEST_FILE),
             {"request": request, "held_out": held_out, "split": split.description})
  return result


def _remove_made_data(directory: str) -> None:
  """Removes what an earlier call made in `directory` (the record of the request first: data
  made only in part are never taken for complete)."""
  for name in (REQUEST_FILE, "spiece.model", "spiece.vocab"):
    if files.exists(os.path.join(directory, name)):
      files.remove(os.path.join(directory, name))
  for name in ("train", "valid", "corpus"):
    if files.isdir(os.path.join(directory, name)):
      files.rmtree(os.path.join(directory, name))


def _split_with_tokenizer(documents, settings, vocab_size, seed, every, source, corpus_dir,
                          sp_path, num_files) -> corpus.HeldOutSplit:
  """The held-out split (module docstring), with sp_path trained on its training part."""
  need = tokens_for_one_batch(settings)
  # A piece holds a character at least, and <eod> ends each document: an upper bound of the
  # tokens, known before any tokenizer is trained.
  characters = sum(len(line) for document in documents for line in document)
  if characters + len(documents) < need:
    raise _too_little_text(source, f"{characters:,} characters", settings)
  if len(documents) >= every:
    split = corpus.split_by_documents(documents, every)
  else:
    split = corpus.split_at_tail(
        documents, [[len(line) for line in document] for document in documents],
        characters / every, f"as the text has {len(documents)} document"
        f"{'s' if len(documents) > 1 else ''}, fewer than the {every} that holding out 1 of "
        f"every {every} needs")
  tokenizer = _train_tokenizer(split.train, settings, vocab_size, seed, source, corpus_dir,
                               sp_path, num_files)
  if (_tokens_at_least(tokenizer, split.held_out, settings, need) >= need
      and _tokens_at_least(tokenizer, split.train, settings, need) >= need):
    return split
  line_tokens = [_line_lengths(tokenizer, document) for document in documents]
  eod = 1 if settings.use_eod else 0
  total = sum(sum(lengths) + eod for lengths in line_tokens)
  batch = f"{settings.bsz_per_host} rows x {settings.seq_len} tokens (about {need:,} tokens)"
  if total < need:
    raise _too_little_text(source, f"{total:,} tokens", settings)
  split = corpus.split_at_tail(documents, line_tokens, max(total / every, need),
                               f"so that each part holds a batch of {batch}")
  if total < 2 * need or not split.held_out:
    why = ("are one line, which is not cut; give one sentence a line" if not split.held_out
           else f"hold one batch of {batch} for training, not a second one to hold out; give "
           "more text")
    split = corpus.HeldOutSplit(documents, [], f"No held-out evaluation: the text's {total:,} "
                                f"tokens {why} for a held-out loss.")
  _train_tokenizer(split.train, settings, vocab_size, seed, source, corpus_dir, sp_path,
                   num_files)
  return split


def _train_tokenizer(documents, settings, vocab_size, seed, source, corpus_dir, sp_path,
                     num_files) -> XLNetTokenizer:
  """A SentencePiece model trained on `documents` at sp_path, from their text in corpus_dir
  (laid out as the training files are, removed after)."""
  text_files = corpus.write_corpus_files(documents, corpus_dir, prefix="train",
                                         num_files=max(1, min(num_files, len(documents))))
  train_sentencepiece(text_files, sp_path[:-len(".model")], vocab_size=vocab_size,
                      uncased=settings.uncased, seed=seed, inputs_named=source)
  for path in text_files:
    files.remove(path)
  return XLNetTokenizer(sp_path, lower=settings.uncased)


def _line_lengths(tokenizer: XLNetTokenizer, lines: List[str]) -> List[int]:
  return [int(length) for length in tokenizer.encode_to_array(lines)[1]]


def _tokens_at_least(tokenizer: XLNetTokenizer, documents: List[corpus.Document],
                     settings: PretrainingDataConfig, enough: int) -> int:
  """The tokens of `documents` (with their <eod>s), counted until there are `enough`."""
  count = len(documents) if settings.use_eod else 0
  lines = [line for document in documents for line in document]
  for start in range(0, len(lines), _COUNTING_LINES):
    if count >= enough:
      break
    count += sum(_line_lengths(tokenizer, lines[start:start + _COUNTING_LINES]))
  return count


def _too_little_text(source: str, amount: str, settings: PretrainingDataConfig
                     ) -> UserInputError:
  return UserInputError(
      f"{source}: {amount} is too little text for one batch of {settings.bsz_per_host} rows x "
      f"{settings.seq_len} tokens (about {tokens_for_one_batch(settings):,} tokens, each a "
      "SentencePiece piece of a few characters); give more text, or a smaller "
      "--train_batch_size or --seq_len")


def python_docs_text() -> Tuple[List[corpus.Document], str, list]:
  """The main job's text: (documents, how messages name it, its data_request inputs)."""
  return (corpus.python_docs_documents(), "the Python documentation (pydoc_data)",
          [["pydoc_data", platform.python_version()]])


def prepare_default_pretraining_data(directory: str, settings: PretrainingDataConfig,
                                     vocab_size: int = 2000, seed: int = 0) -> Dict[str, object]:
  """The main job's data: the Python reference documentation (pydoc_data)."""
  documents, source, inputs = python_docs_text()
  return prepare_pretraining_data(documents, directory, settings, vocab_size, seed,
                                  source=source, inputs=inputs)
