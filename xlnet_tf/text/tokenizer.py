"""SentencePiece tokenization with the original XLNet preprocessing.

The original (zihangdai/xlnet prepro_utils.py) cleans text before SentencePiece: collapse
whitespace, turn `` and '' into ", strip accents (NFKD, drop combining marks) unless
keep_accents, lower-case when uncased; after SentencePiece it re-splits pieces that end in a
digit followed by a comma ("▁2000," -> "▁2000" ","). That re-split depends only on the piece,
so it is a per-id replacement table here, shared with the in-graph tokenizer.
"""

import dataclasses
import os
import tempfile
import unicodedata
from typing import Dict, List, Optional, Sequence, Union

import numpy as np
import sentencepiece as spm

from xlnet_tf.utils import files, hub
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import read_json_object, write_json

SPIECE_UNDERLINE = "\u2581"
SPECIAL_PIECES = ("<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>")
# The original treats these single characters as word starts (data_utils._is_start_piece).
WORD_START_PUNCTUATION = frozenset('!"#$%&"()*+,-./:;?@[\\]^_`{|}~')


def preprocess_text(text: str, lower: bool = False, remove_space: bool = True,
                    keep_accents: bool = False) -> str:
  """Cleans a text as the original XLNet preprocessing does before SentencePiece.

  Args:
    text: the text.
    lower: lower-case it (the uncased models).
    remove_space: strip it and collapse each run of whitespace into one space.
    keep_accents: keep accents; else NFKD-normalize and drop the combining marks.

  Returns:
    The cleaned text (`` and '' also become ").
  """
  if remove_space:
    text = " ".join(text.strip().split())
  text = text.replace("``", '"').replace("''", '"')
  if not keep_accents:
    text = unicodedata.normalize("NFKD", text)
    if not text.isascii():  # ASCII has no combining marks: skip the per-character pass
      text = "".join(c for c in text if not unicodedata.combining(c))
  if lower:
    text = text.lower()
  return text


@dataclasses.dataclass(frozen=True)
class SpecialIds:
  """Ids of the XLNet control symbols, read from the SentencePiece model."""
  unk: int
  cls: int
  sep: int
  pad: int
  mask: int
  eod: int
  eop: int
  bos: int
  eos: int

  def as_dict(self) -> Dict[str, int]:
    return dataclasses.asdict(self)


# A pretrained directory's tokenizer, in every layout (own, Hugging Face, the original): the
# SentencePiece model, and Hugging Face's tokenizer settings file (do_lower_case,
# keep_accents), which the own format writes too.
SENTENCEPIECE_FILE = "spiece.model"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"


# The ids of the original vocabulary (the released spiece.model), which
# text.sentencepiece_training reproduces: the SPECIAL_PIECES in that order. Where a function
# that takes token ids is given no tokenizer's (`XLNetTokenizer.special_ids`), it defaults to
# these.
STANDARD_SPECIAL_IDS = SpecialIds(unk=0, bos=1, eos=2, cls=3, sep=4, pad=5, mask=6, eod=7,
                                  eop=8)


def load_sentencepiece(path: str) -> spm.SentencePieceProcessor:
  """The SentencePiece model at `path`; a remote one (gs://...: utils.files) is read from its
  bytes, as SentencePiece reads local files only."""
  if not path:
    raise UserInputError("A SentencePiece model path is required (--sp_path)")
  if not files.isfile(path):
    raise FileNotFoundError(f"{path}: SentencePiece model not found")
  processor = spm.SentencePieceProcessor()
  try:
    if files.is_remote(path):
      processor.LoadFromSerializedProto(files.read_bytes(path))
    else:
      processor.Load(path)
  except (OSError, RuntimeError) as error:
    raise UserInputError(f"{path}: not a readable SentencePiece model ({error})") from None
  return processor


def check_vocabulary(tokenizer_or_sp_path: Union["XLNetTokenizer", str], config,
                     config_source: Optional[str] = None) -> int:
  """Refuses a SentencePiece model with more pieces than the model has embeddings (n_token).

  Ids past n_token have no row in the embedding: under XLA the gather clamps them and training
  goes on silently on wrong inputs, without XLA it fails deep in the graph. Fewer pieces than
  n_token are fine (the original models pad their vocabulary). `config_source` names where the
  config came from (its file) for the message. Returns the piece count.
  """
  if isinstance(tokenizer_or_sp_path, XLNetTokenizer):
    sp_path, pieces = tokenizer_or_sp_path.sp_path, tokenizer_or_sp_path.vocab_size
  else:
    sp_path = tokenizer_or_sp_path
    pieces = load_sentencepiece(sp_path).GetPieceSize()
  if pieces > config.n_token:
    raise UserInputError(f"{sp_path}: {pieces} SentencePiece pieces, but the model's n_token is "
                         f"{config.n_token} ({config_source or 'its config'}): ids past "
                         f"{config.n_token - 1} have no embedding; use the SentencePiece model "
                         "the checkpoint was trained with")
  return pieces


class XLNetTokenizer:
  r"""Text -> ids exactly as the original XLNet preprocessing and `encode_ids` do.

  Args:
    sp_path: SentencePiece .model file (the original spiece.model, or one trained by
      data/train_sentencepiece.py).
    lower: lower-case the text (the uncased models).
    keep_accents: keep accents (the original strips them by default).

  Raises:
    FileNotFoundError: when there is no SentencePiece model at `sp_path`.
    UserInputError: for a file that is not a SentencePiece model, or one without the <cls>
      and <sep> symbols.

  >>> import os, tempfile
  >>> from xlnet_tf.text.sentencepiece_training import train_sentencepiece
  >>> folder = tempfile.TemporaryDirectory()
  >>> corpus = os.path.join(folder.name, "corpus.txt")
  >>> with open(corpus, "w") as text:
  ...   _ = text.write("the cat sat on the mat.\nthe dog sat on the log.\n" * 50)
  >>> sp_path = train_sentencepiece([corpus], os.path.join(folder.name, "spiece"), vocab_size=30)
  >>> tokenizer = XLNetTokenizer(sp_path, lower=True)
  >>> ids = tokenizer.encode("The  Cat sat on the log.")  # cleaned as the original does
  >>> tokenizer.decode(ids), tokenizer.vocab_size
  ('the cat sat on the log.', 30)
  >>> tokenizer.special_ids.sep, tokenizer.special_ids.cls  # A <sep> B <sep> <cls>
  (4, 3)
  >>> folder.cleanup()
  """

  def __init__(self, sp_path: str, lower: bool = False, keep_accents: bool = False):
    self.sp_path = sp_path
    self.lower = lower
    self.keep_accents = keep_accents
    self.processor = load_sentencepiece(sp_path)
    self.vocab_size = self.processor.GetPieceSize()
    self.special_ids = self._read_special_ids()
    pieces = [self.processor.IdToPiece(i) for i in range(self.vocab_size)]
    self.word_start = np.array([_is_word_start(piece) for piece in pieces], bool)
    # Pieces of text (not control symbols, not <unk>): what a random replacement draws from.
    self.ordinary_ids = np.array([i for i in range(self.vocab_size) if not (
        self.processor.IsControl(i) or self.processor.IsUnknown(i))], np.int32)
    self.replacements = {i: self._split_digit_comma(piece) for i, piece in enumerate(pieces)
                         if _ends_in_digit_comma(piece)}
    self._needs_replacement = np.zeros(self.vocab_size, bool)
    self._needs_replacement[list(self.replacements)] = True

  @classmethod
  def from_pretrained(cls, path: str, **settings) -> "XLNetTokenizer":
    """The tokenizer of a pretrained directory or Hugging Face hub id: its spiece.model.

    Any layout (own, Hugging Face or original). Lower-casing and accents as its
    tokenizer_config.json says (do_lower_case, keep_accents; both off without the file).

    Args:
      path: a local or remote directory, or a Hugging Face hub id.
      **settings: lower, keep_accents: override the file's.

    Returns:
      The XLNetTokenizer.

    Raises:
      FileNotFoundError: when the directory holds no spiece.model.
      UserInputError: for an unknown setting, or a tokenizer_config.json value that is not a
        bool.
    """
    directory = hub.local_directory(
        path, lambda files: [name for name in (SENTENCEPIECE_FILE, TOKENIZER_CONFIG_FILE)
                             if name in files], expected=SENTENCEPIECE_FILE)
    tokenizer = saved_tokenizer(directory, **settings)
    if tokenizer is None:
      raise FileNotFoundError(f"{path}: no {SENTENCEPIECE_FILE} there (the SentencePiece model "
                              "of a pretrained directory)")
    return tokenizer

  def save_pretrained(self, directory: str) -> str:
    """Writes the tokenizer into `directory`, where `from_pretrained` reads it back.

    The files: spiece.model (a copy of sp_path, unless it is that file already) and
    tokenizer_config.json (do_lower_case, keep_accents, as Hugging Face's XLNetTokenizer
    reads them).

    Args:
      directory: where to write, local or remote; created if needed.

    Returns:
      `directory`.
    """
    files.makedirs(directory)
    target = os.path.join(directory, SENTENCEPIECE_FILE)
    if not _same_file(self.sp_path, target):
      files.copy(self.sp_path, target)
    write_json(os.path.join(directory, TOKENIZER_CONFIG_FILE),
               {"tokenizer_class": "XLNetTokenizer", "do_lower_case": self.lower,
                "keep_accents": self.keep_accents, "remove_space": True})
    return directory

  def _read_special_ids(self) -> SpecialIds:
    found = {}
    for piece in SPECIAL_PIECES:
      piece_id = self.processor.PieceToId(piece)
      found[piece] = piece_id if self.processor.IdToPiece(piece_id) == piece else None
    required = ("<cls>", "<sep>")
    missing = [piece for piece in required if found[piece] is None]
    if missing:
      raise UserInputError(f"{self.sp_path}: the SentencePiece model lacks XLNet symbols "
                           f"{missing}; train it with data/train_sentencepiece.py (control symbols "
                           "<cls>,<sep>,<pad>,<mask>,<eod>)")
    unk = self.processor.unk_id()

    def get(piece):
      return found[piece] if found[piece] is not None else -1

    return SpecialIds(unk=unk, cls=found["<cls>"], sep=found["<sep>"], pad=get("<pad>"),
                      mask=get("<mask>"), eod=get("<eod>"), eop=get("<eop>"),
                      bos=get("<s>"), eos=get("</s>"))

  def _split_digit_comma(self, piece: str) -> List[int]:
    """The original's re-split of a piece like "▁2000," into "▁2000" + ","."""
    sub_pieces = self.processor.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
    if piece[0] != SPIECE_UNDERLINE and sub_pieces and sub_pieces[0][0] == SPIECE_UNDERLINE:
      if len(sub_pieces[0]) == 1:
        sub_pieces = sub_pieces[1:]
      else:
        sub_pieces[0] = sub_pieces[0][1:]
    sub_pieces.append(piece[-1])
    return [self.processor.PieceToId(p) for p in sub_pieces]

  def preprocess(self, text: str) -> str:
    """The text cleaned as the original does before SentencePiece, with these settings.

    Args:
      text: the text.

    Returns:
      preprocess_text(text) with this tokenizer's lower and keep_accents.
    """
    return preprocess_text(text, lower=self.lower, keep_accents=self.keep_accents)

  def encode(self, text: str) -> List[int]:
    """The ids of one text, as the original's preprocessing and encode_ids give them.

    Args:
      text: the text (cleaned here: `preprocess`).

    Returns:
      The token ids.
    """
    return self.encode_batch([text])[0]

  def encode_batch(self, texts: Sequence[str]) -> List[List[int]]:
    """The ids of each text, encoded as one batch.

    Args:
      texts: the texts.

    Returns:
      One list of token ids per text.
    """
    flat, lengths = self.encode_to_array(texts)
    return [part.tolist() for part in np.split(flat, np.cumsum(lengths)[:-1])]

  def encode_to_array(self, texts: Sequence[str]):
    """The ids of all the texts in one array, with no Python per-token work.

    SentencePiece encodes the whole batch in C++; the digit-comma re-split is a table lookup
    that touches Python only at the few pieces that split.

    Args:
      texts: the texts.

    Returns:
      (ids int32 [total tokens], the texts' ids one after another; lengths int64
      [len(texts)], each text's count).
    """
    if not texts:
      return np.zeros([0], np.int32), np.zeros([0], np.int64)
    encoded = self.processor.EncodeAsNumpy([self.preprocess(text) for text in texts])
    lengths = np.array([len(ids) for ids in encoded], np.int64)
    flat = np.concatenate(encoded).astype(np.int32, copy=False)
    hits = np.flatnonzero(self._needs_replacement[flat])
    if hits.size == 0:
      return flat, lengths
    line_of_token = np.repeat(np.arange(len(encoded)), lengths)
    pieces, start = [], 0
    lengths = lengths.copy()
    for hit in hits:
      replacement = self.replacements[int(flat[hit])]
      pieces.extend([flat[start:hit], np.asarray(replacement, np.int32)])
      lengths[line_of_token[hit]] += len(replacement) - 1
      start = hit + 1
    pieces.append(flat[start:])
    return np.concatenate(pieces), lengths

  def decode(self, ids: Sequence[int]) -> str:
    """The text of token ids, as SentencePiece decodes them (the cleaning is not undone).

    Args:
      ids: token ids.

    Returns:
      The text.
    """
    return self.processor.DecodeIds([int(i) for i in ids])


def saved_tokenizer(directory: str, **settings) -> Optional[XLNetTokenizer]:
  """The tokenizer saved in a pretrained directory (spiece.model, with tokenizer_config.json's
  do_lower_case and keep_accents); None without spiece.model. `settings` (lower,
  keep_accents) override the file's."""
  sp_path = os.path.join(directory, SENTENCEPIECE_FILE)
  if not files.exists(sp_path):
    return None
  config_path = os.path.join(directory, TOKENIZER_CONFIG_FILE)
  stored = read_json_object(config_path) if files.exists(config_path) else {}
  unknown = sorted(set(settings) - {"lower", "keep_accents"})
  if unknown:
    raise UserInputError(f"XLNetTokenizer.from_pretrained: unknown setting(s) {unknown}; "
                         "known: lower, keep_accents")
  values = {}
  for setting, key in (("lower", "do_lower_case"), ("keep_accents", "keep_accents")):
    values[setting] = stored.get(key, False)
    if not isinstance(values[setting], bool):
      raise UserInputError(f"{config_path}: {key} must be true or false; got "
                           f"{values[setting]!r}")
  values.update(settings)
  return XLNetTokenizer(sp_path, **values)


def kept_tokenizer(directory: str) -> Optional[XLNetTokenizer]:
  """saved_tokenizer of a directory about to be removed (the assets Keras extracts from a
  .keras archive into a temporary folder), over a copy of its files that lives as long as the
  tokenizer: `sp_path` stays readable (save_pretrained, the in-graph tokenizer, exports read
  it). The copy is removed when the tokenizer is collected, or at exit."""
  if not files.exists(os.path.join(directory, SENTENCEPIECE_FILE)):
    return None
  copy = tempfile.TemporaryDirectory(prefix="xlnet_tf_tokenizer-")
  for name in (SENTENCEPIECE_FILE, TOKENIZER_CONFIG_FILE):
    if files.exists(os.path.join(directory, name)):
      files.copy(os.path.join(directory, name), os.path.join(copy.name, name))
  tokenizer = saved_tokenizer(copy.name)
  tokenizer._kept_copy = copy  # its finalizer removes the folder with the tokenizer
  return tokenizer


def _same_file(source: str, target: str) -> bool:
  """Whether `target` is `source` (saving a tokenizer into the directory it was read from)."""
  if files.is_remote(source) or files.is_remote(target):
    return source.rstrip("/") == target.rstrip("/")
  return os.path.exists(target) and os.path.samefile(source, target)


def _ends_in_digit_comma(piece: str) -> bool:
  return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def _is_word_start(piece: str) -> bool:
  return (piece.startswith(SPIECE_UNDERLINE) or piece.startswith("<")
          or piece in WORD_START_PUNCTUATION)
