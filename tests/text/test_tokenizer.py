import os

import pytest
import sentencepiece as spm

from original_prepro import original_encode_ids, original_preprocess
from xlnet_tf.text.in_graph_tokenizer import InGraphTokenizer
from xlnet_tf.text.tokenizer import XLNetTokenizer, preprocess_text

VARIED_TEXTS = [
    "Hello  world,\tthe year 2000, was ``fine'' and 1,234,567 items,",
    "Café naïve résumé Ångström Øre façade",
    "１２３,456, 7,8 and 9,",
    "",
    "   \t  ",
    "中文字符和日本語のテキスト、한국어",
    "emoji 😀🎉 ok 👍🏽",
    "ΟΔΟΣ İstanbul STRASSE ß Ǆ",
    "a\u00a0b\u3000c\u2028d\u202fe",
    "x\u0301\u0327y combining",
    "tab\x1cseparated\x85next",
    "\"quoted\" 'single' ``double''",
    "def f(x): return x ** 2  # code, 3,",
]


def test_preprocess_matches_the_original_definition():
  for text in VARIED_TEXTS:
    for lower in (False, True):
      for keep_accents in (False, True):
        assert preprocess_text(text, lower, keep_accents=keep_accents) == original_preprocess(
            text, lower, keep_accents=keep_accents), text


def test_preprocess_examples():
  assert preprocess_text("  ``Café''   2000,\n") == '"Cafe" 2000,'
  assert preprocess_text("ÀB", lower=True) == "ab"


@pytest.mark.parametrize("lower", [False, True])
def test_python_tokenizer_matches_the_original_encode_ids(sp_model, lower):
  tokenizer = XLNetTokenizer(sp_model, lower=lower)
  processor = spm.SentencePieceProcessor(model_file=sp_model)
  assert tokenizer.replacements, "the test model should hold digit-comma pieces"
  texts = VARIED_TEXTS + [f"in {n}, we had {n}, items" for n in range(1990, 2030)]
  expected = [original_encode_ids(processor, original_preprocess(t, lower)) for t in texts]
  assert tokenizer.encode_batch(texts) == expected
  assert tokenizer.encode(texts[0]) == expected[0]


@pytest.mark.parametrize("lower,keep_accents", [(False, False), (True, False), (True, True)])
def test_in_graph_tokenizer_equals_python(sp_model, lower, keep_accents):
  python = XLNetTokenizer(sp_model, lower=lower, keep_accents=keep_accents)
  graph = InGraphTokenizer(sp_model, lower=lower, keep_accents=keep_accents)
  texts = VARIED_TEXTS + [f"Sum: {n}, then {n * 7}," for n in range(0, 3000, 137)]
  assert graph(texts).to_list() == python.encode_batch(texts)


def test_special_ids_are_read_from_the_model(sp_model, corpus_files, tmp_path):
  ids = XLNetTokenizer(sp_model).special_ids
  assert (ids.unk, ids.bos, ids.eos, ids.cls, ids.sep, ids.pad, ids.mask, ids.eod, ids.eop) == \
      (0, 1, 2, 3, 4, 5, 6, 7, 8)
  # A user's model with another symbol order.
  spm.SentencePieceTrainer.train(input=corpus_files[0], model_prefix=str(tmp_path / "other"),
                                 vocab_size=500, control_symbols=["<sep>", "<mask>", "<cls>"],
                                 hard_vocab_limit=False, minloglevel=2)
  other = XLNetTokenizer(str(tmp_path / "other.model")).special_ids
  assert (other.sep, other.mask, other.cls, other.eod) == (3, 4, 5, -1)


def test_bad_models_are_clear_errors(tmp_path, corpus_files):
  with pytest.raises(FileNotFoundError, match="nope.model"):
    XLNetTokenizer(str(tmp_path / "nope.model"))
  garbage = tmp_path / "garbage.model"
  garbage.write_bytes(b"not a model")
  with pytest.raises(ValueError, match="garbage.model: not a readable SentencePiece model"):
    XLNetTokenizer(str(garbage))
  spm.SentencePieceTrainer.train(input=corpus_files[0], model_prefix=str(tmp_path / "plain"),
                                 vocab_size=500, hard_vocab_limit=False, minloglevel=2)
  with pytest.raises(ValueError, match=r"lacks XLNet symbols \['<cls>', '<sep>'\]"):
    XLNetTokenizer(str(tmp_path / "plain.model"))
  assert os.path.exists(tmp_path / "plain.model")
