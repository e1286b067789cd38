"""prepare_pretraining_data: how a text of many, few or no document breaks is split for
held-out evaluation, what a text too small is told, and when data made earlier are reused."""

import os

import pytest

from xlnet_tf.pretraining.data import corpus
from xlnet_tf.pretraining.data.default_data import (REQUEST_FILE, prepare_pretraining_data,
                                                    tokens_for_one_batch)
from xlnet_tf.pretraining.data.records import load_record_info
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.utils.errors import UserInputError

# 4 rows (2 streams and their reversals) of 32 tokens: about 96 tokens make a batch.
SETTINGS = dict(seq_len=32, reuse_len=16, num_predict=5, bsz_per_host=4)


def _lines(count):
  return [line for document in corpus.python_docs_documents() for line in document][:count]


def _prepare(documents, directory, **settings):
  return prepare_pretraining_data(documents, str(directory),
                                  PretrainingDataConfig(**{**SETTINGS, **settings}),
                                  vocab_size=300, held_out_every=10, source="--input_glob=x.txt")


def test_a_text_of_one_document_holds_out_its_end(tmp_path):
  lines = _lines(60)
  data = _prepare([lines], tmp_path)
  description = data["reports"][0]
  held_lines = int(description.split("the last ")[1].split(" ")[0])
  assert description == (
      f"Held out for evaluation: the last {held_lines} of 60 lines (11% of the text), as the "
      "text has 1 document, fewer than the 10 that holding out 1 of every 10 needs.")
  train, valid = load_record_info(data["train"]), load_record_info(data["valid"])
  assert train["stats"]["lines"] + valid["stats"]["lines"] == 60
  assert valid["stats"]["lines"] == held_lines and train["num_batch"] and valid["num_batch"]
  # The held-out lines are the text's last ones, in order.
  with open(tmp_path / "corpus" / "valid-000.txt") as held_out:
    assert held_out.read().split("\n")[:-1] == lines[-held_lines:]


def _documents(count, lines_each=3):
  lines = _lines(count * lines_each)
  return [lines[start:start + lines_each] for start in range(0, len(lines), lines_each)]


def test_a_text_of_many_documents_holds_out_1_in_10(tmp_path):
  data = _prepare(_documents(30), tmp_path)
  assert data["reports"][0] == "Held out for evaluation: 1 of every 10 documents (3 of 30)."
  assert load_record_info(data["valid"])["stats"]["documents"] == 3
  assert load_record_info(data["train"])["stats"]["documents"] == 27


def test_a_text_with_room_for_one_batch_trains_without_held_out_data(tmp_path):
  data = _prepare([_lines(5)], tmp_path)
  assert data["valid"] is None and not os.path.exists(tmp_path / "valid")
  assert data["reports"][0].startswith("No held-out evaluation: the text's ")
  assert data["reports"][0].endswith(" tokens hold one batch of 4 rows x 32 tokens (about 96 "
                                     "tokens) for training, not a second one to hold out; give "
                                     "more text for a held-out loss.")
  assert load_record_info(data["train"])["stats"]["lines"] == 5
  # Reused as made: still without held-out data.
  assert _prepare([_lines(5)], tmp_path) == {**data, "reports": []}
  # A text of one long line is not cut.
  one_line = _prepare([[" ".join(_lines(60))]], tmp_path / "one_line")
  assert one_line["valid"] is None
  assert one_line["reports"][0].endswith(" tokens are one line, which is not cut; give one "
                                         "sentence a line for a held-out loss.")


def test_a_text_too_small_for_a_batch_is_refused_by_its_name(tmp_path):
  assert tokens_for_one_batch(PretrainingDataConfig(**SETTINGS)) == 96
  with pytest.raises(UserInputError) as raised:
    _prepare([["Hello world.", "This is tiny."]], tmp_path / "data")
  assert str(raised.value) == (
      "--input_glob=x.txt: 25 characters is too little text for one batch of 4 rows x 32 "
      "tokens (about 96 tokens, each a SentencePiece piece of a few characters); give more "
      "text, or a smaller --train_batch_size or --seq_len")
  assert not os.path.exists(tmp_path / "data")


def test_data_made_for_other_settings_are_made_again(tmp_path):
  documents = _documents(30)
  first = _prepare(documents, tmp_path)
  assert _prepare(documents, tmp_path)["reports"] == []  # the same request: reused
  again = _prepare(documents, tmp_path, bsz_per_host=2)
  assert again["reports"][0] == (f"Making {tmp_path} again: it was made for bsz_per_host 4 "
                                 "(now 2).")
  assert load_record_info(again["train"])["settings"]["bsz_per_host"] == 2
  assert load_record_info(first["valid"])["settings"]["bsz_per_host"] == 2
  assert (tmp_path / REQUEST_FILE).exists()
