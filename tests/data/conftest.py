import os

import pytest

from xlnet_tf.data import corpus
from xlnet_tf.data.sentencepiece_training import train_sentencepiece


@pytest.fixture(scope="session")
def corpus_files(tmp_path_factory):
  directory = tmp_path_factory.mktemp("corpus")
  return corpus.write_corpus_files(corpus.python_docs_documents(), str(directory), num_files=3)


@pytest.fixture(scope="session")
def sp_model(corpus_files, tmp_path_factory):
  """A small SentencePiece model with XLNet's symbols, trained on the Python docs."""
  prefix = os.path.join(str(tmp_path_factory.mktemp("spm")), "spiece")
  return train_sentencepiece(corpus_files, prefix, vocab_size=1000)
