"""TFRecord schema of pretraining examples, the record-info JSON, and the tf.data reader.

The objective gives the schema (`Objective.stored_features`, little-endian bytes features; ids
are uint16 when the vocabulary fits, else int32). An A/B example: input_ids [T], segment_ids
uint8 [T], target_positions int16 [P], label int64, and the objective's own: ranks int16 [T]
(perm) or replacements [P] (mlm, the ids' dtype); a clm segment: seq_len + 1 ids. For seq_len
128 and num_predict 21 a perm example is about 730 bytes, where float32 perm_mask and
target_mapping alone would take 76 KB. The reader rebuilds every model input with a few
comparisons per batch (`Objective.model_inputs`); record_info.json names the objective and a
reader asked for another one refuses the data.
"""

import dataclasses
import json
import os
import re
import struct
from typing import Any, Dict, List, Optional

import numpy as np
import tensorflow as tf
from google.protobuf.message import DecodeError as _ProtoDecodeError

from xlnet_tf.utils import files as file_system
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import write_json
from xlnet_tf import objectives
from xlnet_tf.pretraining.data.examples import StoredExample
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig

RECORD_INFO_FILE = "record_info.json"
FORMAT_VERSION = 1


def id_dtype(vocab_size: int) -> str:
  return "uint16" if vocab_size <= 65536 else "int32"


_LITTLE_ENDIAN = {name: np.dtype(name).newbyteorder("<")
                  for name in ("uint8", "uint16", "int16", "int32")}


def _serialized(columns, label: Optional[int] = None) -> bytes:
  """A tf.train.Example of (name, values, dtype) bytes features and an optional int64 label."""
  # Filled in place: building Feature objects and a dict first took 3x as long.
  proto = tf.train.Example()
  feature = proto.features.feature
  for name, values, dtype in columns:
    feature[name].bytes_list.value.append(
        np.asarray(values).astype(_LITTLE_ENDIAN[dtype], copy=False).tobytes())
  if label is not None:
    feature["label"].int64_list.value.append(int(label))
  # deterministic: the feature map is otherwise written in an order that varies with the
  # process's hash seed, and the same seed would not give the same bytes.
  return proto.SerializeToString(deterministic=True)


def serialize_example(example: StoredExample, ids_dtype: str) -> bytes:
  """An A/B example: its ids, segment ids, target positions and label, and its objective's
  own features."""
  columns = [("input_ids", example.input_ids, ids_dtype),
             ("segment_ids", example.segment_ids, "uint8"),
             ("target_positions", example.target_positions, "int16")]
  columns += [(feature.name, values, feature.stored_dtype(ids_dtype))
              for feature, values in example.extras]
  return _serialized(columns, example.label)


def serialize_lm_segment(segment: np.ndarray, ids_dtype: str) -> bytes:
  """A consecutive segment (objective clm): seq_len + 1 ids (see lm_streams)."""
  return _serialized([("input_ids", segment, ids_dtype)])


# ---- record info -------------------------------------------------------------------------

def write_record_info(directory: str, settings: PretrainingDataConfig, files: List[Dict[str, Any]],
                      tokenizer_info: Dict[str, Any], extra: Dict[str, Any]) -> str:
  info = {"format_version": FORMAT_VERSION, "settings": settings.to_dict(),
          "tokenizer": tokenizer_info, "files": files,
          "num_batch": sum(f["num_batch"] for f in files), **extra}
  return write_json(os.path.join(directory, RECORD_INFO_FILE), info, sort_keys=True)


def load_record_info(path: str) -> Dict[str, Any]:
  """The record info of a data directory (or of its record_info.json), checked against the
  files it lists: its fields, each file's size (as written by the stage) and the lengths in the
  first record. Costs a stat per file and one record: a file cut short (even at a record
  boundary), replaced, or described by another record info is an error naming it, before any
  training."""
  if file_system.isdir(path):
    path = os.path.join(path, RECORD_INFO_FILE)
  if not file_system.exists(path):
    raise FileNotFoundError(f"{path}: no record info; pretraining data is made by "
                            "data/create_pretraining_data.py, which writes it beside the files")
  try:
    with file_system.open_file(path) as handle:
      info = json.load(handle)
  except (ValueError, UnicodeDecodeError) as error:  # JSONDecodeError is a ValueError
    raise UserInputError(f"{path}: not a valid record info JSON file ({error}); recreate the "
                         "data with data/create_pretraining_data.py") from None
  if not isinstance(info, dict) or info.get("format_version") != FORMAT_VERSION:
    version = info.get("format_version") if isinstance(info, dict) else None
    raise UserInputError(f"{path}: record format {version} is not {FORMAT_VERSION}; recreate "
                         "the data")
  _check_fields(info, path)
  info["directory"] = os.path.dirname(file_system.absolute(path))
  for entry in info["files"]:  # a name leading out of the directory is refused, naming it
    file_system.confined(info["directory"], entry["name"], f"{path}: files")
  check_record_files(info)
  return info


_REQUIRED_FIELDS = {"settings": dict, "tokenizer": dict, "files": list, "num_batch": int}


def _check_fields(info: Dict[str, Any], path: str) -> None:
  """The fields readers use, with their types; the settings as the stage validates them."""
  def fail(problem):
    raise UserInputError(f"{path}: {problem}; recreate the data with "
                         "data/create_pretraining_data.py")
  for field, kind in _REQUIRED_FIELDS.items():
    if not isinstance(info.get(field), kind):
      fail(f"field {field!r} is missing or not a {kind.__name__}")
  for index, entry in enumerate(info["files"]):
    if not (isinstance(entry, dict) and isinstance(entry.get("name"), str)
            and isinstance(entry.get("num_batch"), int) and entry["num_batch"] >= 0):
      fail(f"files[{index}] needs a name and a num_batch >= 0")
  if sum(entry["num_batch"] for entry in info["files"]) != info["num_batch"]:
    fail(f"num_batch {info['num_batch']} is not the sum of the files' num_batch")
  if info["tokenizer"].get("ids_dtype") not in ("uint16", "int32"):
    fail("tokenizer.ids_dtype must be 'uint16' or 'int32'")
  stored = info["settings"]
  # Data written before the objectives existed are permutation-LM data with span targets.
  stored.setdefault("objective", objectives.DEFAULT.name)
  stored.setdefault("span_prediction", True)
  # Data written before these settings: words from the word-start marker alone, of any length.
  stored.setdefault("unspaced_pieces_as_words", False)
  stored.setdefault("max_word_pieces", 0)
  known = {field.name for field in dataclasses.fields(PretrainingDataConfig)}
  try:
    PretrainingDataConfig(**{key: value for key, value in stored.items() if key in known})
  except (UserInputError, TypeError) as error:
    fail(f"settings: {error}")


def check_record_files(info: Dict[str, Any]) -> None:
  """Every listed file with batches exists and has the size the stage wrote (data written
  before sizes were recorded: not checked), and the first record has the settings' lengths."""
  paths = [os.path.join(info["directory"], entry["name"]) for entry in info["files"]
           if entry["num_batch"]]
  for entry, path in zip([e for e in info["files"] if e["num_batch"]], paths):
    if not file_system.exists(path):
      raise FileNotFoundError(f"{path}: listed in {RECORD_INFO_FILE} but missing")
    size = file_system.getsize(path)
    if "bytes" in entry and size != entry["bytes"]:
      raise UserInputError(f"{path}: {size:,} bytes, but {RECORD_INFO_FILE} says "
                           f"{entry['bytes']:,} ({entry['num_batch']:,} batches): the file was cut "
                           "short or replaced; recreate the data")
  if paths:
    _check_first_record(paths[0], info)


def _read_first_record(path: str) -> bytes:
  """The payload of the file's first TFRecord (length, length CRC, payload, payload CRC)."""
  with file_system.open_file(path, "rb") as handle:
    header = handle.read(12)
    if len(header) < 12:
      raise UserInputError(f"{path}: not a TFRecord file (shorter than a record header)")
    (length,) = struct.unpack("<Q", header[:8])
    payload = handle.read(length) if length <= file_system.getsize(path) else b""
  if len(payload) != length:
    raise UserInputError(f"{path}: not a TFRecord file (its first record's length {length:,} "
                         "exceeds the file)")
  return payload


def _check_first_record(path: str, info: Dict[str, Any]) -> None:
  """The byte lengths of the first example's features against those the settings give."""
  settings = info["settings"]
  seq_len, num_predict = settings["seq_len"], settings["num_predict"]
  ids_dtype = info["tokenizer"]["ids_dtype"]
  expected = {feature.name: (feature.byte_length(settings, ids_dtype), feature.meaning)
              for feature in objectives.named(settings["objective"]).stored_features}
  try:
    features = tf.train.Example.FromString(_read_first_record(path)).features.feature
  except _ProtoDecodeError:
    raise UserInputError(f"{path}: its first record is not a tf.train.Example; recreate the "
                         "data") from None
  for name, (length, meaning) in expected.items():
    values = features[name].bytes_list.value if name in features else []
    found = len(values[0]) if len(values) == 1 else None
    if found != length:
      raise UserInputError(
          f"{path}: the first record's {name} holds {found} bytes, not the {length} of "
          f"{meaning} (seq_len={seq_len}, num_predict={num_predict}, objective="
          f"{settings['objective']}, ids {info['tokenizer']['ids_dtype']}) that "
          f"{RECORD_INFO_FILE} says; the record info does not describe this file")


def explain_data_loss(record_info_path: str, error: Exception) -> UserInputError:
  """The one-line error for a DataLossError met while reading the data (a record whose
  checksum fails: TensorFlow's message names no file): reads the files one by one to name the
  first one that is corrupt. Only for after the fact: it reads all the data."""
  info = load_record_info(record_info_path)
  for entry in info["files"]:
    path = os.path.join(info["directory"], entry["name"])
    try:
      for _ in tf.data.TFRecordDataset(path, buffer_size=1 << 20):
        pass
    except tf.errors.DataLossError as file_error:
      reason = re.sub(r"\{\{.*?\}\}\s*|\s*\[Op:.*", "", file_error.message)
      return UserInputError(f"{path}: a corrupt record ({reason}); recreate the data")
  return UserInputError(f"{info['directory']}: reading the data failed ({error}); the files now "
                        "read without error")


def check_settings(info: Dict[str, Any], **expected) -> None:
  """Raises if the data were made with other settings than the run expects (names each)."""
  stored = info["settings"]
  differences = [f"{key}: data {stored.get(key)!r}, run {value!r}" for key, value in
                 expected.items() if value is not None and stored.get(key) != value]
  if differences:
    raise UserInputError(f"{info['directory']}/{RECORD_INFO_FILE}: the data were made with other "
                         "settings than this run's:\n  " + "\n  ".join(differences))
  if info["num_batch"] == 0:
    raise UserInputError(f"{info['directory']}: the data hold no complete batch (num_batch = 0)")


# ---- reader ------------------------------------------------------------------------------

def pretraining_dataset(record_info_path: str, batch_size: Optional[int] = None,
                        input_context: Optional[tf.distribute.InputContext] = None,
                        repeat: bool = True, skip_batches: int = 0,
                        **expected_settings) -> tf.data.Dataset:
  """The pretraining batches of a data directory, in stream order, with static shapes.

  Consecutive batches continue each other row by row (what the memory `mems` carries over),
  as the data's objective lays out its model inputs.

  Args:
    record_info_path: record_info.json or its directory.
    batch_size: rows per batch for this input pipeline; must equal the data's bsz_per_host,
      since consecutive batches continue each other row by row.
    input_context: from `strategy.distribute_datasets_from_function`; files are sharded over
      the input pipelines (workers).
    repeat: loop over the data forever.
    skip_batches: batches to skip first (resuming a run: the data position is the step).
    **expected_settings: settings the run needs (seq_len=..., reuse_len=..., ...), checked
      against the record info (None: not checked).

  Returns:
    A tf.data.Dataset of dicts: input_ids, segment_ids int32 [B, T]; target_mapping
    [B, P, T]; target int32 [B, P]; target_mask [B, P]; label int32 [B]; for perm also
    perm_mask [B, T, T] and input_q [B, T] (for mlm, input_ids are the corrupted ids and
    there is no perm_mask). For clm: input_ids, target (the next tokens) int32 [B, T] and
    target_mask [B, T] only.

  Raises:
    FileNotFoundError: without a record info at `record_info_path`.
    UserInputError: for a record info or data files that do not agree (cut short, replaced),
      settings other than the run's, data without a complete batch, or fewer files than
      input pipelines.
  """
  info = load_record_info(record_info_path)
  settings = info["settings"]
  batch_size = batch_size or settings["bsz_per_host"]
  check_settings(info, bsz_per_host=batch_size, **expected_settings)
  files = [os.path.join(info["directory"], f["name"]) for f in info["files"] if f["num_batch"]]
  if input_context is not None and input_context.num_input_pipelines > 1:
    pipelines = input_context.num_input_pipelines
    if len(files) < pipelines:
      raise UserInputError(f"{info['directory']}: {len(files)} data files cannot be sharded over "
                           f"{pipelines} input pipelines; create the data with more shards")
    files = files[input_context.input_pipeline_id::pipelines]
  decode = _decoder(objectives.named(settings["objective"]), settings,
                    info["tokenizer"]["ids_dtype"], batch_size)
  dataset = tf.data.TFRecordDataset(files)  # files in order: rows continue across batches
  if repeat:
    dataset = dataset.repeat()
  if skip_batches:
    dataset = dataset.skip(skip_batches * batch_size)  # raw records: no parsing cost
  dataset = dataset.batch(batch_size, drop_remainder=True)
  dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return dataset.prefetch(tf.data.AUTOTUNE)


def _decoder(objective: objectives.Objective, settings: Dict[str, Any], ids_dtype: str,
             batch_size: int):
  """Serialized records [B] -> the objective's model inputs: its stored features decoded to
  int32 [B, length] (and the A/B label), expanded by the objective."""
  stored = [(feature.name, tf.as_dtype(feature.stored_dtype(ids_dtype)), feature.length(settings))
            for feature in objective.stored_features]
  schema = {name: tf.io.FixedLenFeature([], tf.string) for name, _, _ in stored}
  if objective.has_pairs:
    schema["label"] = tf.io.FixedLenFeature([], tf.int64)

  def decode(serialized):
    parsed = tf.io.parse_example(serialized, schema)
    columns = {name: tf.reshape(tf.cast(tf.io.decode_raw(parsed[name], dtype, little_endian=True),
                                        tf.int32), [batch_size, length])
               for name, dtype, length in stored}
    if objective.has_pairs:
      columns["label"] = tf.cast(parsed["label"], tf.int32)
    return objective.model_inputs(columns, settings)
  return decode
