import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from xlnet_tf.data import corpus  # noqa: E402
from xlnet_tf.data.sentencepiece_training import train_sentencepiece  # noqa: E402


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
