"""TFRecord schema of pretraining examples, the record-info JSON, and the tf.data reader.

Per example (bytes features, little-endian): input_ids (uint16 when the vocabulary fits, else
int32) [T], segment_ids uint8 [T], target_positions int16 [P], label int64, and per objective
ranks int16 [T] (perm) or replacements [P] (mlm, the ids' dtype). For seq_len 128 and
num_predict 21 that is about 730 bytes, where float32 perm_mask and target_mapping alone would
take 76 KB. The reader rebuilds every model input with a few comparisons per batch
(`permutation.expand_factorization`, `masked_lm.expand_masked_lm`); record_info.json names the
objective and a reader asked for another one refuses the data.
"""

import json
import os
from typing import Any, Dict, List, Optional

import numpy as np
import tensorflow as tf

from xlnet_tf.errors import UserInputError
from xlnet_tf.json_files import write_json
from xlnet_tf.pretraining.lm_streams import split_lm_segment
from xlnet_tf.pretraining.masked_lm import expand_masked_lm
from xlnet_tf.pretraining.permutation import expand_factorization
from xlnet_tf.pretraining.examples import PretrainingSettings, StoredExample

RECORD_INFO_FILE = "record_info.json"
FORMAT_VERSION = 1


def id_dtype(vocab_size: int) -> str:
  return "uint16" if vocab_size <= 65536 else "int32"


_LITTLE_ENDIAN = {name: np.dtype(name).newbyteorder("<")
                  for name in ("uint8", "uint16", "int16", "int32")}


def serialize_example(example: StoredExample, ids_dtype: str) -> bytes:
  # Filled in place: building Feature objects and a dict first took 3x as long.
  proto = tf.train.Example()
  feature = proto.features.feature

  def put(name, array, dtype):
    feature[name].bytes_list.value.append(
        np.asarray(array).astype(_LITTLE_ENDIAN[dtype], copy=False).tobytes())

  put("input_ids", example.input_ids, ids_dtype)
  put("segment_ids", example.segment_ids, "uint8")
  put("target_positions", example.target_positions, "int16")
  feature["label"].int64_list.value.append(int(example.label))
  if example.ranks is not None:
    put("ranks", example.ranks, "int16")
  if example.replacements is not None:
    put("replacements", example.replacements, ids_dtype)
  # deterministic: the feature map is otherwise written in an order that varies with the
  # process's hash seed, and the same seed would not give the same bytes.
  return proto.SerializeToString(deterministic=True)


def serialize_lm_segment(segment: np.ndarray, ids_dtype: str) -> bytes:
  """objective clm: one stored segment, seq_len + 1 ids (see lm_streams)."""
  ids = np.ascontiguousarray(segment, dtype=np.dtype(ids_dtype).newbyteorder("<")).tobytes()
  feature = tf.train.Feature(bytes_list=tf.train.BytesList(value=[ids]))
  return tf.train.Example(features=tf.train.Features(feature={"input_ids": feature})
                          ).SerializeToString(deterministic=True)


# ---- record info -------------------------------------------------------------------------

def write_record_info(directory: str, settings: PretrainingSettings, files: List[Dict[str, Any]],
                      tokenizer_info: Dict[str, Any], extra: Dict[str, Any]) -> str:
  info = {"format_version": FORMAT_VERSION, "settings": settings.to_dict(),
          "tokenizer": tokenizer_info, "files": files,
          "num_batch": sum(f["num_batch"] for f in files), **extra}
  return write_json(os.path.join(directory, RECORD_INFO_FILE), info, sort_keys=True)


def load_record_info(path: str) -> Dict[str, Any]:
  if os.path.isdir(path):
    path = os.path.join(path, RECORD_INFO_FILE)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path}: no record info; pretraining data is made by "
                            "data/create_pretraining_data.py, which writes it beside the files")
  with open(path, encoding="utf-8") as handle:
    info = json.load(handle)
  if info.get("format_version") != FORMAT_VERSION:
    raise UserInputError(f"{path}: record format {info.get('format_version')} is not "
                         f"{FORMAT_VERSION}; recreate the data")
  info["directory"] = os.path.dirname(os.path.abspath(path))
  # Data written before the objectives existed are permutation-LM data with span targets.
  info["settings"].setdefault("objective", "perm")
  info["settings"].setdefault("span_prediction", True)
  return info


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
  """Batches of permutation-LM inputs with static shapes, in stream order (for mems).

  Args:
    record_info_path: record_info.json or its directory.
    batch_size: rows per batch for this input pipeline; must equal the data's bsz_per_host,
      since consecutive batches continue each other row by row.
    input_context: from `strategy.distribute_datasets_from_function`; files are sharded over
      the input pipelines (workers).
    repeat: loop over the data forever.
    skip_batches: batches to skip first (resuming a run: the data position is the step).
    expected_settings: settings the run needs (seq_len=..., reuse_len=..., ...), checked
      against the record info.

  Yields dicts: input_ids, segment_ids int32 [B, T]; target_mapping [B, P, T]; target int32
  [B, P]; target_mask [B, P]; label int32 [B]; for perm also perm_mask [B, T, T] and input_q
  [B, T] (for mlm, input_ids are the corrupted ids and there is no perm_mask). For clm:
  input_ids, target (the next tokens) int32 [B, T] and target_mask [B, T] only.
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
  missing = [f for f in files if not os.path.exists(f)]
  if missing:
    raise FileNotFoundError(f"Data files listed in the record info are missing: {missing[:3]}")
  seq_len, num_predict = settings["seq_len"], settings["num_predict"]
  reuse_len = settings["reuse_len"]
  masked_lm = settings["objective"] == "mlm"
  ids_dtype = tf.uint16 if info["tokenizer"]["ids_dtype"] == "uint16" else tf.int32
  if settings["objective"] == "clm":
    decode = _lm_segment_decoder(batch_size, seq_len, ids_dtype)
    return _batched_records(files, batch_size, decode, repeat, skip_batches)
  schema = {"input_ids": tf.io.FixedLenFeature([], tf.string),
            "segment_ids": tf.io.FixedLenFeature([], tf.string),
            "replacements" if masked_lm else "ranks": tf.io.FixedLenFeature([], tf.string),
            "target_positions": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}

  def decode(serialized):
    parsed = tf.io.parse_example(serialized, schema)

    def column(name, dtype, length):
      values = tf.io.decode_raw(parsed[name], dtype, little_endian=True)
      return tf.reshape(tf.cast(values, tf.int32), [batch_size, length])

    input_ids = column("input_ids", ids_dtype, seq_len)
    target_positions = column("target_positions", tf.int16, num_predict)
    if masked_lm:
      features = expand_masked_lm(input_ids, target_positions,
                                  column("replacements", ids_dtype, num_predict))
    else:
      features = expand_factorization(input_ids, column("ranks", tf.int16, seq_len),
                                      target_positions, reuse_len)
      features["input_ids"] = input_ids
    features.update(segment_ids=column("segment_ids", tf.uint8, seq_len),
                    label=tf.cast(parsed["label"], tf.int32))
    return features

  return _batched_records(files, batch_size, decode, repeat, skip_batches)


def _batched_records(files, batch_size, decode, repeat, skip_batches) -> tf.data.Dataset:
  dataset = tf.data.TFRecordDataset(files)  # files in order: rows continue across batches
  if repeat:
    dataset = dataset.repeat()
  if skip_batches:
    dataset = dataset.skip(skip_batches * batch_size)  # raw records: no parsing cost
  dataset = dataset.batch(batch_size, drop_remainder=True)
  dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return dataset.prefetch(tf.data.AUTOTUNE)


def _lm_segment_decoder(batch_size, seq_len, ids_dtype):
  """objective clm: stored [B, seq_len + 1] -> inputs, next-token targets, all real."""
  schema = {"input_ids": tf.io.FixedLenFeature([], tf.string)}

  def decode(serialized):
    stored = tf.io.decode_raw(tf.io.parse_example(serialized, schema)["input_ids"], ids_dtype,
                              little_endian=True)
    stored = tf.reshape(tf.cast(stored, tf.int32), [batch_size, seq_len + 1])
    input_ids, target = split_lm_segment(stored)
    return {"input_ids": input_ids, "target": target,
            "target_mask": tf.ones([batch_size, seq_len], tf.float32)}
  return decode
