import os

from sentencepiece import sentencepiece_model_pb2

from xlnet_tf.text import sentencepiece_training
from xlnet_tf.text.sentencepiece_training import train_sentencepiece


def model_proto(path):
  model = sentencepiece_model_pb2.ModelProto()
  with open(path, "rb") as handle:
    model.ParseFromString(handle.read())
  return model


def test_same_text_same_model_bytes_wherever_it_is_trained(corpus_files, tmp_path, monkeypatch):
  first = train_sentencepiece(corpus_files[:1], str(tmp_path / "a" / "spiece"), vocab_size=300)
  second = train_sentencepiece(corpus_files[:1], str(tmp_path / "b" / "vocab"), vocab_size=300)
  with open(first, "rb") as a, open(second, "rb") as b:
    assert a.read() == b.read()
  spec = model_proto(first).trainer_spec
  assert not spec.input and not spec.model_prefix
  assert os.path.exists(tmp_path / "b" / "vocab.vocab")
  # The trainer's own output differs from it in the path of its input only: same pieces,
  # scores and settings. (It hands the model over rather than writing it, so it records no
  # model_prefix.)
  monkeypatch.setattr(sentencepiece_training, "_clear_training_paths", lambda path: None)
  raw = model_proto(train_sentencepiece(corpus_files[:1], str(tmp_path / "c" / "spiece"),
                                        vocab_size=300))
  # (trained in a temporary folder beside the model, then moved into place)
  assert len(raw.trainer_spec.input) == 1
  assert raw.trainer_spec.input[0].startswith(
      str(tmp_path / "c" / sentencepiece_training.WORK_FOLDER_PREFIX))
  assert not raw.trainer_spec.model_prefix
  assert sorted(os.listdir(tmp_path / "c")) == ["spiece.model", "spiece.vocab"]
  assert len(raw.pieces) > 200
  raw.trainer_spec.ClearField("input")
  assert raw == model_proto(first)
