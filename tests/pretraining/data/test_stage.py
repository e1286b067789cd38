"""The data stage end to end: files, record info, reader, model feed, determinism, bad input."""

import filecmp
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from model_inputs import perm_mask_from_ranks
from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.pretraining.data import stage
from xlnet_tf.pretraining.data.corpus import ReadStats, read_documents
from xlnet_tf.pretraining.data.stage import create_pretraining_data
from xlnet_tf.pretraining.data.examples import ExampleBuilder
from xlnet_tf.pretraining.data.records import (load_record_info, pretraining_dataset,
                                               serialize_example)
from xlnet_tf.pretraining.data.rows import StreamRow, batchify, token_stream
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.text.sentencepiece_training import train_sentencepiece
from xlnet_tf.text.tokenizer import XLNetTokenizer
from repository import ROOT

SETTINGS = dict(seq_len=32, reuse_len=16, num_predict=6, bsz_per_host=4, bi_data=True)


@pytest.fixture(scope="module")
def made(corpus_files, sp_model, tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("records"))
  summary = create_pretraining_data(corpus_files, sp_model, directory,
                                    PretrainingDataConfig(**SETTINGS), seed=5, num_workers=2)
  return directory, summary


def raw_records(path):
  for record in tf.data.TFRecordDataset(path):
    example = tf.train.Example.FromString(record.numpy())
    feature = example.features.feature
    yield {"input_ids": np.frombuffer(feature["input_ids"].bytes_list.value[0], "<u2"),
           "ranks": np.frombuffer(feature["ranks"].bytes_list.value[0], "<i2"),
           "targets": np.frombuffer(feature["target_positions"].bytes_list.value[0], "<i2"),
           "segments": np.frombuffer(feature["segment_ids"].bytes_list.value[0], "u1")}


def test_record_info_and_summary(made, sp_model):
  directory, summary = made
  info = load_record_info(directory)
  assert info["settings"]["seq_len"] == 32 and info["settings"]["perm_size"] == 16
  assert info["num_batch"] == sum(f["num_batch"] for f in info["files"]) > 10
  assert info["tokenizer"]["special_ids"]["sep"] == 4
  report = summary.report()
  assert "examples" in report and "corpus tokens/s" in report


def test_examples_have_the_layout_and_semantics(made, sp_model):
  directory, _ = made
  tokenizer = XLNetTokenizer(sp_model)
  sep, cls = tokenizer.special_ids.sep, tokenizer.special_ids.cls
  info = load_record_info(directory)
  count = 0
  for record in raw_records(os.path.join(directory, info["files"][0]["name"])):
    ids, ranks, targets, segments = (record[k] for k in ("input_ids", "ranks", "targets",
                                                         "segments"))
    assert ids[-1] == cls and ids[-2] == sep and segments[-1] == 2
    a_sep = np.flatnonzero(np.diff(segments.astype(int)) == 1)[0]  # last token of segment 0
    assert ids[a_sep] == sep and (segments[:a_sep + 1] == 0).all()
    real_targets = targets[targets >= 0]
    assert 0 < len(real_targets) <= 6
    assert not np.isin(ids[real_targets], [sep, cls]).any()
    assert (ranks[real_targets] >= 0).all()
    is_target = np.zeros(32, bool)
    is_target[real_targets] = True
    mask = perm_mask_from_ranks(ranks, is_target, 16)
    assert mask[:16, 16:].all(), "the reuse part never sees the new part"
    count += 1
  assert count > 0


def test_reader_feeds_the_model_and_rows_continue(made, sp_model):
  directory, _ = made
  dataset = pretraining_dataset(directory, seq_len=32, reuse_len=16, num_predict=6,
                                bi_data=True, repeat=False)
  batches = list(dataset.take(3))
  first = batches[0]
  shapes = {k: tuple(v.shape) for k, v in first.items()}
  assert shapes == {"input_ids": (4, 32), "segment_ids": (4, 32), "perm_mask": (4, 32, 32),
                    "target_mapping": (4, 6, 32), "target": (4, 6), "target_mask": (4, 6),
                    "input_q": (4, 32), "label": (4,)}
  targets = tf.gather(first["input_ids"], tf.argmax(first["target_mapping"], -1,
                                                    output_type=tf.int32), batch_dims=1)
  np.testing.assert_array_equal((targets * tf.cast(first["target_mask"], tf.int32)).numpy(),
                                first["target"].numpy())
  vocab = XLNetTokenizer(sp_model).vocab_size
  model = XLNetModel(XLNetConfig.preset("tiny", n_token=vocab, bi_data=True, mem_len=16,
                                        reuse_len=16))
  keys = ("input_ids", "segment_ids", "perm_mask", "target_mapping")
  out = model({k: first[k] for k in keys})
  assert out["query_output"].shape == (4, 6, 32)
  # Row r of batch t + 1 starts where row r of batch t's A started: memory continues.
  continued = 0
  for previous, current in zip(batches, batches[1:]):
    for row in range(4):
      a_length = int(np.sum(previous["segment_ids"][row].numpy() == 0)) - 16 - 1
      np.testing.assert_array_equal(current["input_ids"][row, :a_length].numpy(),
                                    previous["input_ids"][row, 16:16 + a_length].numpy())
      continued += a_length > 0
  assert continued > 0


def test_same_seed_same_bytes_whatever_the_workers(corpus_files, sp_model, tmp_path, made):
  directory, _ = made
  create_pretraining_data(corpus_files, sp_model, str(tmp_path), PretrainingDataConfig(**SETTINGS),
                          seed=5, num_workers=1)
  names = sorted(f for f in os.listdir(directory) if f.endswith(".tfrecords"))
  assert names == sorted(f for f in os.listdir(tmp_path) if f.endswith(".tfrecords"))
  for name in names + ["record_info.json"]:
    assert filecmp.cmp(os.path.join(directory, name), tmp_path / name, shallow=False), name
  other = tmp_path / "other"
  create_pretraining_data(corpus_files[:1], sp_model, str(other), PretrainingDataConfig(**SETTINGS),
                          seed=6, num_workers=1)
  assert not filecmp.cmp(os.path.join(directory, names[0]), other / names[0], shallow=False)


@pytest.fixture(scope="module")
def one_file(corpus_files, tmp_path_factory):
  """The corpus as one file, with a line that is not UTF-8 in its second half."""
  data = b"".join(open(path, "rb").read() for path in corpus_files)
  middle = data.index(b"\n\n", len(data) // 2) + 2
  path = tmp_path_factory.mktemp("one_file") / "corpus.txt"
  path.write_bytes(data[:middle] + b"bad \xff line\n" + data[middle:])
  return str(path), data[:middle].count(b"\n") + 1


def in_memory_examples(path, sp_model, settings, seed):
  """The records of one file made the simple way: the whole file in memory, one pass."""
  tokenizer = XLNetTokenizer(sp_model)
  documents = read_documents(path, ReadStats())
  flat, line_lengths = tokenizer.encode_to_array([line for d in documents for line in d])
  ids, sentence_ids = token_stream(flat, line_lengths, [len(d) for d in documents],
                                   tokenizer.special_ids.eod)
  rows, sentence_rows, _ = batchify(ids, sentence_ids, settings)
  builder = ExampleBuilder(settings, tokenizer.word_start, tokenizer.special_ids.sep,
                           tokenizer.special_ids.cls, None)
  in_memory = [StreamRow.in_memory(r, s) for r, s in zip(rows, sentence_rows)]
  return [serialize_example(example, "uint16")
          for batch in builder.batches(in_memory, seed=(seed, 0, 0)) for example in batch]


def test_one_file_is_shared_by_the_workers_with_the_same_bytes(one_file, sp_model, tmp_path,
                                                                monkeypatch):
  """A single file in many ranges and blocks, by 1 or 2 workers: the bytes of the whole file
  read at once in one pass."""
  path, bad_line = one_file
  settings = PretrainingDataConfig(**SETTINGS)
  create_pretraining_data([path], sp_model, str(tmp_path / "default"), settings, seed=5,
                          num_workers=1)
  monkeypatch.setattr(stage, "RANGE_BYTES_MIN", 20_000)
  monkeypatch.setattr(stage, "RANGE_BYTES_MAX", 20_000)
  monkeypatch.setattr(stage, "EXAMPLES_PER_BLOCK", 64)
  monkeypatch.setattr(stage, "PROGRESS_SECONDS", 0.0)
  progress = []
  for workers in (1, 2):
    summary = create_pretraining_data([path], sp_model, str(tmp_path / f"workers{workers}"),
                                      settings, seed=5, num_workers=workers,
                                      progress=progress.append)
    assert summary.stats.examples_of_skips["line is not valid UTF-8"] == [f"{path}:{bad_line}"]
  name = "train-0-00000.tfrecords"
  records = [r.numpy() for r in tf.data.TFRecordDataset(str(tmp_path / "default" / name))]
  assert len(records) == summary.examples > 1000
  assert records == in_memory_examples(path, sp_model, settings, seed=5)
  for workers in (1, 2):
    for output in (name, "record_info.json"):
      assert filecmp.cmp(tmp_path / "default" / output, tmp_path / f"workers{workers}" / output,
                         shallow=False), (workers, output)
    assert sorted(os.listdir(tmp_path / f"workers{workers}")) == ["record_info.json", name]
  assert any(line.startswith("Tokenizing: ") and "ETA" in line for line in progress)
  assert any(line.startswith("Writing examples: ") and "corpus tokens/s" in line
             for line in progress)


def test_reader_refuses_other_settings(made):
  directory, _ = made
  with pytest.raises(ValueError, match=r"seq_len: data 32, run 64"):
    pretraining_dataset(directory, seq_len=64, reuse_len=16)
  with pytest.raises(ValueError, match=r"bsz_per_host: data 4, run 8"):
    pretraining_dataset(directory, batch_size=8)
  with pytest.raises(FileNotFoundError, match="no record info"):
    pretraining_dataset(os.path.join(directory, "nowhere"))


def test_bad_input_is_counted_or_refused(sp_model, corpus_files, tmp_path):
  inputs = tmp_path / "inputs"
  inputs.mkdir()
  good = open(corpus_files[0], "rb").read()
  (inputs / "a.txt").write_bytes(good[:20000] + b"\nbad \xff\xfe line\n" + good[20000:])
  (inputs / "b.txt").write_bytes(b"")
  (inputs / "c.txt").write_bytes(b"One short line.\n")
  summary = create_pretraining_data(sorted(str(p) for p in inputs.iterdir()), sp_model,
                                    str(tmp_path / "out"), PretrainingDataConfig(**SETTINGS),
                                    num_workers=1)
  report = summary.report()
  assert "Skipped 1 (line is not valid UTF-8)" in report and "a.txt:" in report
  assert "Skipped 1 (empty file)" in report
  assert "Skipped 1 (file too short for one batch" in report and "c.txt" in report
  info = json.load(open(tmp_path / "out" / "record_info.json"))
  assert info["stats"]["skipped"]["empty file"] == 1
  with pytest.raises(ValueError, match=rf"^{inputs / 'c.txt'}: no example could be written"):
    create_pretraining_data([str(inputs / "c.txt")], sp_model, str(tmp_path / "none"),
                            PretrainingDataConfig(**SETTINGS), num_workers=1)
  with pytest.raises(FileNotFoundError, match="missing.model"):
    create_pretraining_data([str(inputs / "a.txt")], str(tmp_path / "missing.model"),
                            str(tmp_path / "x"), PretrainingDataConfig(**SETTINGS))
  with pytest.raises(ValueError, match="No input files"):
    create_pretraining_data([], sp_model, str(tmp_path / "y"), PretrainingDataConfig(**SETTINGS))


def test_cli_gives_the_same_bytes_whatever_the_process(tmp_path):
  """Two runs of the CLI with the default corpus, in processes with other hash seeds and
  worker counts: the SentencePiece model and every TFRecord file are equal byte for byte. The
  layout follows --seq_len alone (reuse_len half of it, num_predict its 21/128 share)."""
  script = os.path.join(ROOT, "data",
                        "create_pretraining_data.py")
  outputs = []
  for hash_seed, workers in (("1", 1), ("2", 2)):
    save_dir = tmp_path / f"run{hash_seed}"
    result = subprocess.run([sys.executable, script, f"--save_dir={save_dir}", "--seq_len=64",
                             "--bsz_per_host=8", f"--num_workers={workers}"],
                            capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, PYTHONHASHSEED=hash_seed))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Default corpus: 79 documents" in result.stdout
    assert "Trained a SentencePiece model" in result.stdout
    assert "corpus tokens/s" in result.stdout
    settings = load_record_info(str(save_dir))["settings"]
    assert (settings["seq_len"], settings["reuse_len"], settings["num_predict"]) == (64, 32, 10)
    outputs.append(save_dir)
  names = sorted(f for f in os.listdir(outputs[0]) if f.endswith(".tfrecords"))
  assert len(names) == 4 and names == sorted(f for f in os.listdir(outputs[1])
                                             if f.endswith(".tfrecords"))
  for name in names + ["spiece.model"]:
    assert filecmp.cmp(outputs[0] / name, outputs[1] / name, shallow=False), name


def test_files_are_sharded_over_input_pipelines(made):
  directory, _ = made
  info = load_record_info(directory)
  assert len(info["files"]) == 3

  def first_ids(pipeline_id):
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id)
    batch = next(iter(pretraining_dataset(directory, input_context=context, repeat=False)))
    return batch["input_ids"].numpy()

  expected = {0: info["files"][0]["name"], 1: info["files"][1]["name"]}
  for pipeline_id, name in expected.items():
    record = next(raw_records(os.path.join(directory, name)))
    np.testing.assert_array_equal(first_ids(pipeline_id)[0], record["input_ids"])
  with pytest.raises(ValueError, match="cannot be sharded over 4 input pipelines"):
    pretraining_dataset(directory, input_context=tf.distribute.InputContext(4, 0))


def test_a_model_retrained_at_the_same_path_is_used(corpus_files, tmp_path):
  sp_path = str(tmp_path / "spiece.model")
  for vocab_size in (300, 400):
    train_sentencepiece(corpus_files[:1], sp_path[:-len(".model")], vocab_size=vocab_size)
    create_pretraining_data(corpus_files[:1], sp_path, str(tmp_path / "out"),
                            PretrainingDataConfig(**SETTINGS), num_workers=1)
    info = load_record_info(str(tmp_path / "out"))
    assert info["tokenizer"]["vocab_size"] == XLNetTokenizer(sp_path).vocab_size
  assert info["tokenizer"]["vocab_size"] > 300
