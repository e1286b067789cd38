import shutil

import pytest

from xlnet_tf.data import corpus
from xlnet_tf.data.create import create_pretraining_data
from xlnet_tf.data.pretraining import PretrainingSettings
from xlnet_tf.data.sentencepiece_training import train_sentencepiece

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
                            PretrainingSettings(bi_data=bi_data, **SMALL), seed=1, num_workers=1)
    made[name] = str(root / name)
  # Two identical shards: two workers then read the same rows as one device does.
  twin = root / "twin"
  twin.mkdir()
  create_pretraining_data(files[:1], sp_path, str(twin), PretrainingSettings(bi_data=False,
                                                                             **SMALL),
                          seed=1, num_workers=1)
  import json
  info = json.load(open(twin / "record_info.json"))
  first = info["files"][0]
  shutil.copy(twin / first["name"], twin / ("copy-" + first["name"]))
  info["files"].append(dict(first, name="copy-" + first["name"]))
  info["num_batch"] *= 2
  json.dump(info, open(twin / "record_info.json", "w"))
  made["twin"] = str(twin)
  return made
