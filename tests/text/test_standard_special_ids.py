"""The original vocabulary's special ids (text.tokenizer.STANDARD_SPECIAL_IDS), the defaults of
decoding: what a SentencePiece model trained by text.sentencepiece_training reads back."""

import dataclasses

from xlnet_tf.text.tokenizer import SPECIAL_PIECES, STANDARD_SPECIAL_IDS, XLNetTokenizer


def test_a_trained_vocabulary_has_the_standard_ids(sp_model):
  assert XLNetTokenizer(sp_model).special_ids == STANDARD_SPECIAL_IDS


def test_the_standard_ids_are_the_special_pieces_in_order():
  names = {"<unk>": "unk", "<s>": "bos", "</s>": "eos", "<cls>": "cls", "<sep>": "sep",
           "<pad>": "pad", "<mask>": "mask", "<eod>": "eod", "<eop>": "eop"}
  assert [getattr(STANDARD_SPECIAL_IDS, names[piece]) for piece in SPECIAL_PIECES] == list(
      range(len(SPECIAL_PIECES)))
  assert len(dataclasses.fields(STANDARD_SPECIAL_IDS)) == len(SPECIAL_PIECES)
