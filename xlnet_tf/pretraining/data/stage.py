"""The pretraining data stage: text files -> TFRecords + record_info.json, in parallel.

Each input file is one token stream and one TFRecord file, as in the original. The work is cut
into pieces whose results do not depend on who computes them, so any number of worker
processes shares it (also on a single large file) and a seed gives the same bytes whatever
the number of workers:
  1. tokenize: document-aligned byte ranges of the files (`corpus.document_ranges`), each
     written to disk as a part of its file's token stream (`token_files`);
  2. examples: blocks of consecutive batches of a file's rows, batch t drawing from generators
     seeded with (seed, task, file index, t); the blocks' records are appended in order.
No process holds a whole file: memory depends on the range and block sizes, not on the corpus.

The inputs, the SentencePiece model and save_dir may be remote (gs://...: utils.files): the
inputs are read by byte range through tf.io.gfile; the stream and record parts are built in a
local temporary folder (the workers' files) and the complete outputs copied into save_dir.
"""

import contextlib
import dataclasses
import functools
import hashlib
import multiprocessing
import os
import shutil
import time
from typing import Callable, Dict, List, Optional, Sequence

import tensorflow as tf

from xlnet_tf.utils import files as file_system
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.pretraining.data.corpus import ReadStats, document_ranges, read_documents
from xlnet_tf.pretraining.data.examples import ExampleBuilder
from xlnet_tf.pretraining.data.rows import (batch_count, example_span, row_step, stream_count,
                                            stream_rows, token_stream)
from xlnet_tf.pretraining.data.records import (id_dtype, serialize_example, serialize_lm_segment,
                                              write_record_info)
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.objectives.lm_streams import lm_segment_batches
from xlnet_tf.pretraining.data.token_files import StreamPart, TokenStream, write_part
from xlnet_tf.pretraining.data.words import word_start_table
from xlnet_tf.utils.progress import PeriodicProgress
from xlnet_tf.utils.temporary_folders import temporary_folder
from xlnet_tf.text.tokenizer import XLNetTokenizer

TFRECORD_SUFFIX = ".tfrecords"
# Tokenizing ranges: a few per worker for balance, small enough to bound a worker's memory
# (the text, its lines and ids: ~10x the range). They do not change the output.
RANGE_BYTES_MIN, RANGE_BYTES_MAX = 256 << 10, 8 << 20
# Examples per block of batches (~0.3 s of work): small for balance, large for few part files.
# The output does not depend on it either (each batch has its own seed).
EXAMPLES_PER_BLOCK = 2048
PROGRESS_SECONDS = 30.0
WORK_FOLDER_PREFIX = ".stage-"  # in save_dir; see temporary_folders


class NoExampleWritten(UserInputError):
  """The inputs are too short for one batch: no example was written (and no output).
  `tokens`: the inputs' tokens."""

  def __init__(self, message: str, tokens: int):
    super().__init__(message)
    self.tokens = tokens


@dataclasses.dataclass
class ShardResult:
  name: str
  num_batch: int
  num_examples: int
  tokens_read: int
  tokens_dropped: int
  stats: ReadStats


@dataclasses.dataclass
class StageSummary:
  record_info_path: str
  settings: PretrainingDataConfig
  shards: List[ShardResult]
  stats: ReadStats
  seconds: float

  @property
  def tokens_read(self) -> int:
    return sum(s.tokens_read for s in self.shards)

  @property
  def examples(self) -> int:
    return sum(s.num_examples for s in self.shards)

  def report(self) -> str:
    s = self.stats
    tokens_written = self.examples * self.settings.seq_len
    lines = [
        f"Read {s.files} files: {s.documents} documents, {s.lines} lines, "
        f"{self.tokens_read:,} tokens.",
        f"Wrote {self.examples:,} examples ({sum(x.num_batch for x in self.shards)} batches of "
        f"{self.settings.bsz_per_host}) to {len(self.shards)} files; record info: "
        f"{self.record_info_path}",
        f"Speed: {self.tokens_read / self.seconds:,.0f} corpus tokens/s, "
        f"{tokens_written / self.seconds:,.0f} example tokens/s ({self.seconds:.2f} s).",
    ]
    dropped = sum(x.tokens_dropped for x in self.shards)
    if dropped:
      lines.append(f"Not used: {dropped:,} tokens at the ends of the streams (less than a row "
                   "step, or a remainder that does not fill every row).")
    for reason, count in sorted(s.skipped.items()):
      lines.append(f"Skipped {count} ({reason}), e.g. {', '.join(s.examples_of_skips[reason])}")
    return "\n".join(lines)


def _tokenizer(sp_path: str, lower: bool) -> XLNetTokenizer:
  """One per process and model file; forked workers inherit the parent's. Keyed by the file's
  modification time too: a model retrained at the same path is loaded again."""
  try:
    stamp = file_system.modification_stamp(sp_path)
  except OSError:
    stamp = None  # XLNetTokenizer names the missing file
  return _cached_tokenizer(sp_path, lower, stamp)


@functools.lru_cache(maxsize=2)
def _cached_tokenizer(sp_path: str, lower: bool, stamp) -> XLNetTokenizer:
  del stamp  # part of the cache key only
  return XLNetTokenizer(sp_path, lower=lower)


def _tokenize_range(job):
  """Runs in a worker: one document-aligned byte range of a file -> a part of its stream."""
  (path, byte_range, first_line, part_path, sp_path, settings) = job
  tokenizer = _tokenizer(sp_path, settings.uncased)
  stats = ReadStats()
  with file_system.named_on_failure(path):  # a failed read names the input, not save_dir
    documents = read_documents(path, stats, byte_range, first_line)
  lines = [line for document in documents for line in document]
  flat, line_lengths = tokenizer.encode_to_array(lines)
  eod = tokenizer.special_ids.eod if settings.use_eod else None
  ids, sentence_ids = token_stream(flat, line_lengths, [len(d) for d in documents], eod)
  return write_part(part_path, ids, sentence_ids, len(lines)), stats


def _build_block(job):
  """Runs in a worker: batches [first, stop) of one file's rows -> a TFRecord part file.
  Returns the batches written (fewer than asked when a row ran out, as in the original)."""
  (parts, first, stop, part_path, sp_path, settings, seed) = job
  tokenizer = _tokenizer(sp_path, settings.uncased)
  if settings.lm_objective.consecutive_segments:
    return _build_lm_block(parts, first, stop, part_path, id_dtype(tokenizer.vocab_size),
                           settings)
  builder = ExampleBuilder(settings,
                           word_start_table(tokenizer, settings.unspaced_pieces_as_words),
                           tokenizer.special_ids.sep,
                           tokenizer.special_ids.cls, None, mask_id=tokenizer.special_ids.mask,
                           ordinary_ids=tokenizer.ordinary_ids)
  ids_dtype = id_dtype(tokenizer.vocab_size)
  written = 0
  with file_system.named_on_failure(part_path), TokenStream(parts) as stream, \
      tf.io.TFRecordWriter(part_path) as writer:
    rows, _ = stream_rows(stream.read, len(stream), settings, boundaries=stream)
    for batch in builder.batches(rows, first, stop, seed):
      for example in batch:
        writer.write(serialize_example(example, ids_dtype))
      written += 1
  return written


def _build_lm_block(parts, first, stop, part_path, ids_dtype, settings) -> int:
  """Consecutive segments (objective clm): the rows' segments [first, stop) (lm_streams)."""
  written = 0
  with file_system.named_on_failure(part_path), TokenStream(parts) as stream, \
      tf.io.TFRecordWriter(part_path) as writer:
    rows, _ = stream_rows(stream.read, len(stream), settings, boundaries=stream)
    for row in rows:
      row.load(first * settings.seq_len, stop * settings.seq_len + 1)
    for batch in lm_segment_batches(rows, settings.seq_len, first, stop):
      for segment in batch:
        writer.write(serialize_lm_segment(segment, ids_dtype))
      written += 1
  return written


@contextlib.contextmanager
def _parallel_map(workers: int):
  """An ordered, lazy map over `workers` processes (in this process for one)."""
  if workers == 1:
    yield map
    return
  # fork: the workers inherit the imported modules and the tokenizer instead of loading them.
  with multiprocessing.get_context("fork").Pool(workers) as pool:
    yield functools.partial(pool.imap, chunksize=1)


def _sha256(path: str) -> str:
  return hashlib.sha256(file_system.read_bytes(path)).hexdigest()


def create_pretraining_data(input_files: Sequence[str], sp_path: str, save_dir: str,
                            settings: PretrainingDataConfig, seed: int = 0, split: str = "train",
                            task: int = 0, num_task: int = 1,
                            num_workers: Optional[int] = None,
                            progress: Optional[Callable[[str], None]] = None) -> StageSummary:
  """Writes `{split}-{task}-{file index}.tfrecords` and record_info.json into save_dir.

  The inputs are tokenized and cut into the objective's examples as `settings` says, in
  num_workers processes. Everything is built in a work folder and moved into save_dir only
  when complete (the record info last): a failed or killed run leaves no partial output.

  Args:
    input_files: the text files (one sentence per line, documents apart by empty lines);
      sorted, this task takes every num_task-th of them.
    sp_path: the SentencePiece model that tokenizes them.
    save_dir: the output directory (local or remote), created if needed.
    settings: the PretrainingDataConfig (seq_len, reuse_len, num_predict, bsz_per_host,
      objective, ...), recorded in record_info.json.
    seed: the seed of the random choices (targets, permutations), with the task's index.
    split: the name the files start with ("train", ...).
    task: this task's index among num_task, for data made by several machines.
    num_task: how many tasks share the input files.
    num_workers: processes (default: the CPU count).
    progress: called with a line every PROGRESS_SECONDS of a long run (e.g. print).

  Returns:
    A StageSummary: the record info's path, the settings, each file's batches, examples and
    tokens, what was read and skipped, and the seconds it took.

  Raises:
    FileNotFoundError: for an input file that is not there.
    UserInputError: for no input files, a task outside [0, num_task), or a SentencePiece model
      without the symbols the settings need (<eod>, <mask>).
    NoExampleWritten: (a UserInputError) when the inputs are too short for one batch.
  """
  start = time.perf_counter()
  tokenizer = _tokenizer(sp_path, settings.uncased)  # fails early on a bad model
  if settings.use_eod and tokenizer.special_ids.eod < 0:
    raise UserInputError(f"{sp_path}: use_eod needs an <eod> symbol in the SentencePiece model")
  if settings.lm_objective.needs_mask_id and tokenizer.special_ids.mask < 0:
    raise UserInputError(f"{sp_path}: objective {settings.objective} needs a <mask> symbol in "
                         "the SentencePiece model")
  files = sorted(input_files)
  if not files:
    raise UserInputError("No input files (check --input_glob)")
  for path in files:
    if not file_system.isfile(path):
      raise FileNotFoundError(f"{path}: input file not found")
  if not 0 <= task < num_task:
    raise UserInputError(f"task must be in [0, num_task={num_task}); got {task}")
  files = files[task::num_task]
  names = [f"{split}-{task}-{index:05d}{TFRECORD_SUFFIX}" for index in range(len(files))]
  workers = max(1, num_workers or os.cpu_count() or 1)
  tracker = PeriodicProgress(progress, PROGRESS_SECONDS)
  # Everything is built in a temporary folder (stream parts, record parts, the outputs) and
  # moved into save_dir only when complete: a failed or killed run leaves no partial output.
  with temporary_folder(save_dir, WORK_FOLDER_PREFIX) as work_dir, \
      _write_faults_named(save_dir, work_dir):
    outputs = [os.path.join(work_dir, name) for name in names]
    with _parallel_map(workers) as parallel_map:
      parts, file_stats = _tokenize_files(files, sp_path, settings, work_dir, workers,
                                          parallel_map, tracker)
      results = _write_examples(files, outputs, parts, file_stats, sp_path, settings,
                                (seed, task), work_dir, parallel_map, tracker)
    stats = ReadStats()
    for result in results:
      stats.merge(result.stats)
    if sum(r.num_batch for r in results) == 0:
      detail = "; ".join(f"{k}: {v}" for k, v in stats.skipped.items()) or "inputs too short"
      named = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
      tokens = sum(r.tokens_read for r in results)
      raise NoExampleWritten(f"{named}: no example could be written ({detail}); "
                             f"{stats.files} files, {tokens} tokens; bsz_per_host="
                             f"{settings.bsz_per_host} rows of seq_len={settings.seq_len} need "
                             "more text", tokens)
    # Sizes let a reader find a file cut short or replaced without reading it (records.py).
    files_info = [{"name": r.name, "num_batch": r.num_batch, "num_examples": r.num_examples,
                   "bytes": os.path.getsize(path)} for r, path in zip(results, outputs)]
    tokenizer_info = {"sp_path": file_system.absolute(sp_path), "sp_sha256": _sha256(sp_path),
                      "vocab_size": tokenizer.vocab_size, "special_ids":
                      tokenizer.special_ids.as_dict(), "ids_dtype": id_dtype(tokenizer.vocab_size)}
    extra = {"split": split, "task": task, "num_task": num_task, "seed": seed,
             "inputs": [os.path.basename(p) for p in files],
             "stats": {"documents": stats.documents, "lines": stats.lines,
                       "tokens_read": sum(r.tokens_read for r in results),
                       "skipped": dict(stats.skipped)}}
    info_path = write_record_info(work_dir, settings, files_info, tokenizer_info, extra)
    _publish(outputs, info_path, save_dir)
  return StageSummary(os.path.join(save_dir, os.path.basename(info_path)), settings, results,
                      stats, time.perf_counter() - start)


@contextlib.contextmanager
def _write_faults_named(save_dir: str, work_dir: str):
  """A write that fails in the work folder (a full disk) raised naming save_dir, the directory
  the user asked for: Python's OSError of a full disk names no file, and the work folder's
  files are gone once the error is shown."""
  try:
    yield
  except OSError as error:
    if error.errno and (error.filename is None or str(error.filename).startswith(work_dir)):
      raise OSError(error.errno, error.strerror or os.strerror(error.errno), save_dir) from None
    raise


def _publish(outputs: Sequence[str], info_path: str, save_dir: str) -> None:
  """Moves the complete outputs into save_dir, the record info last. The old record info goes
  first: until the new one is in place, a reader finds none rather than one that does not
  describe the files beside it. A remote save_dir (gs://...) gets copies, the work folder
  being local (temporary_folders)."""
  final_info = os.path.join(save_dir, os.path.basename(info_path))
  file_system.makedirs(save_dir)
  if file_system.exists(final_info):
    file_system.remove(final_info)
  for path in outputs:
    file_system.move(path, os.path.join(save_dir, os.path.basename(path)))
  file_system.move(info_path, final_info)


def _tokenize_files(files, sp_path, settings, work_dir, workers, parallel_map, tracker):
  """Step 1: (the stream parts of each file, the ReadStats of each file)."""
  total_bytes = sum(file_system.getsize(path) for path in files)
  range_bytes = min(max(total_bytes // (4 * workers), RANGE_BYTES_MIN), RANGE_BYTES_MAX)
  stats = [ReadStats(files=1) for _ in files]
  jobs, owners = [], []
  for index, path in enumerate(files):
    ranges = document_ranges(path, range_bytes)
    if not ranges:
      stats[index].skip("empty file", path)
    for number, (begin, end, first_line) in enumerate(ranges):
      jobs.append((path, (begin, end), first_line,
                   os.path.join(work_dir, f"tokens-{index:05d}-{number:06d}"), sp_path,
                   settings))
      owners.append(index)
  parts: List[List[StreamPart]] = [[] for _ in files]
  done = 0
  for index, job, (part, range_stats) in zip(owners, jobs, parallel_map(_tokenize_range, jobs)):
    parts[index].append(part)
    stats[index].merge(range_stats)
    done += job[1][1] - job[1][0]
    tracker.update("Tokenizing", done, total_bytes, "bytes")
  return parts, stats


def _write_examples(files, outputs, parts, stats, sp_path, settings, seed, work_dir,
                    parallel_map, tracker) -> List[ShardResult]:
  """Step 2: every file's TFRecord file, block by block in order."""
  tokens = [sum(part.tokens for part in file_parts) for file_parts in parts]
  batches = [batch_count(count // stream_count(settings), settings) for count in tokens]
  per_block = max(1, EXAMPLES_PER_BLOCK // settings.bsz_per_host)
  jobs, owners = [], []
  for index, file_parts in enumerate(parts):
    for first in range(0, batches[index], per_block):
      jobs.append((file_parts, first, min(first + per_block, batches[index]),
                   os.path.join(work_dir, f"examples-{index:05d}-{first:010d}"), sp_path,
                   settings, (*seed, index)))
      owners.append(index)
  for path in outputs:
    open(path, "wb").close()  # a file too short for one batch gets an empty record file
  written, ran_out = [0] * len(files), [False] * len(files)
  done = 0
  for index, job, count in zip(owners, jobs, parallel_map(_build_block, jobs)):
    (_, first, stop, part_path) = job[:4]
    if not ran_out[index]:  # after a row ran out, the original writes nothing more
      with open(part_path, "rb") as part, open(outputs[index], "ab") as output:
        shutil.copyfileobj(part, output, 1 << 20)
      written[index] += count
      ran_out[index] = count < stop - first
    os.remove(part_path)
    done += stop - first
    tracker.update("Writing examples", sum(tokens) * done / sum(batches), sum(tokens),
                   "corpus tokens")
  step = row_step(settings)
  results = []
  for index, path in enumerate(files):
    num_batch = written[index]
    consumed = 0
    if num_batch:
      consumed = ((num_batch - 1) * step + example_span(settings)) * settings.bsz_per_host
      if settings.bi_data:
        consumed //= 2
    elif tokens[index]:
      stats[index].skip("file too short for one batch of bsz_per_host rows x seq_len tokens",
                        path)
    results.append(ShardResult(name=os.path.basename(outputs[index]), num_batch=num_batch,
                               num_examples=num_batch * settings.bsz_per_host,
                               tokens_read=tokens[index],
                               tokens_dropped=max(tokens[index] - consumed, 0),
                               stats=stats[index]))
  return results


def data_config_from_flags(values: Dict) -> PretrainingDataConfig:
  known = {f.name for f in dataclasses.fields(PretrainingDataConfig)}
  return PretrainingDataConfig(**{k: v for k, v in values.items() if k in known})
