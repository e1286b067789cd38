import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Each xdist worker (and every tool it starts, which inherits the variable) gets its share of
# the CPUs for TensorFlow's intra-op threads: by default each process sizes its pool to every
# CPU, and two workers on 2 cores then run 4 spinning threads on 2 cores (measured, the whole
# suite on 2 cores with 2 workers: 14:42 -> 13:25).
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
  _CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
  os.environ.setdefault("TF_NUM_INTRAOP_THREADS",
                        str(max(1, _CPUS // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

# One XLA compilation cache for the run: the pytest workers and every tool they start compile
# the same tiny models' steps again and again (the cache is keyed on the compiled program, so
# a hit runs exactly what a compilation would give). Made by the first process (xdist's
# controller, which the workers inherit it from), removed by it at the end.
XLA_CACHE_VARIABLE = "XLNET_TF_TESTS_XLA_CACHE"
if XLA_CACHE_VARIABLE not in os.environ:
  os.environ[XLA_CACHE_VARIABLE] = tempfile.mkdtemp(prefix="xlnet_tf_tests_xla_")
  _OWNS_XLA_CACHE = True
else:
  _OWNS_XLA_CACHE = False
_CACHE_FLAG = f"--tf_xla_persistent_cache_directory={os.environ[XLA_CACHE_VARIABLE]}"
if _CACHE_FLAG not in os.environ.get("TF_XLA_FLAGS", ""):
  os.environ["TF_XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("TF_XLA_FLAGS"),
                                                      _CACHE_FLAG]))

# The suite's models are tiny: XLA's compilation, not the compiled code, is most of their time,
# and LLVM's optimization of it most of a compilation. Level 0 compiles faster; the code
# computes the same operations in the same order (no fast-math at any level; rounding may
# differ where LLVM would fuse a multiply-add). Measured on test_loop.py and test_backbone.py:
# 84 s -> 70 s; the whole suite 12:37 -> 11:44. XLA's older loop emitters for its fusions
# generate the same element-wise operations with less compiling than its MLIR fusion emitters
# (a tiny model's recomputed gradient step: 5.3 -> 3.3 s to compile; the whole suite 18:19 ->
# 15:02 on a 2-core AMD EPYC). Tools the tests start inherit both.
for _XLA_FLAG in ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false"):
  if _XLA_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"), _XLA_FLAG]))

# Before Keras loads TensorFlow: the package's TensorFlow settings (xlnet_tf/__init__.py's oneDNN
# switch), as a user's `import xlnet_tf` gets them; the tools the tests start inherit them.
import xlnet_tf  # noqa: E402,F401
import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from xlnet_tf.utils.json_files import read_json, write_json  # noqa: E402
from xlnet_tf.pretraining.data import corpus  # noqa: E402
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig  # noqa: E402
from xlnet_tf.pretraining.data.stage import create_pretraining_data  # noqa: E402
from xlnet_tf.text.sentencepiece_training import train_sentencepiece  # noqa: E402


@pytest.fixture
def rng():
  return np.random.default_rng(1234)


@pytest.fixture
def policy():
  """policy(name) sets Keras' global dtype policy; float32 again after the test."""
  def set_policy(name):
    keras.mixed_precision.set_global_policy(name)
  yield set_policy
  keras.mixed_precision.set_global_policy("float32")


@pytest.fixture(scope="session")
def corpus_files(tmp_path_factory):
  directory = tmp_path_factory.mktemp("corpus")
  return corpus.write_corpus_files(corpus.python_docs_documents(), str(directory), num_files=3)


@pytest.fixture(scope="session")
def sp_model(corpus_files, tmp_path_factory):
  """A small SentencePiece model with XLNet's symbols, trained on the Python docs."""
  prefix = os.path.join(str(tmp_path_factory.mktemp("spm")), "spiece")
  return train_sentencepiece(corpus_files, prefix, vocab_size=1000)


SMALL = dict(seq_len=32, reuse_len=16, num_predict=6, bsz_per_host=4)


@pytest.fixture(scope="session")
def small_data(tmp_path_factory):
  """Tiny pretraining records: bi_data (one core) and uni-directional, plus a vocabulary."""
  root = tmp_path_factory.mktemp("pretraining_data")
  documents = corpus.python_docs_documents()[:30]
  files = corpus.write_corpus_files(documents, str(root / "corpus"), num_files=2)
  sp_path = train_sentencepiece(files, str(root / "spiece"), vocab_size=500)
  made = {"sp_path": sp_path, "root": str(root)}
  for name, bi_data in (("bi", True), ("uni", False)):
    create_pretraining_data(files, sp_path, str(root / name),
                            PretrainingDataConfig(bi_data=bi_data, **SMALL), seed=1, num_workers=1)
    made[name] = str(root / name)
  # Two identical shards: two workers then read the same rows as one device does.
  twin = root / "twin"
  twin.mkdir()
  create_pretraining_data(files[:1], sp_path, str(twin),
                          PretrainingDataConfig(bi_data=False, **SMALL), seed=1, num_workers=1)
  info = read_json(str(twin / "record_info.json"))
  first = info["files"][0]
  shutil.copy(twin / first["name"], twin / ("copy-" + first["name"]))
  info["files"].append(dict(first, name="copy-" + first["name"]))
  info["num_batch"] *= 2
  write_json(str(twin / "record_info.json"), info)
  made["twin"] = str(twin)
  return made


def pytest_unconfigure(config):
  if _OWNS_XLA_CACHE:
    shutil.rmtree(os.environ[XLA_CACHE_VARIABLE], ignore_errors=True)
