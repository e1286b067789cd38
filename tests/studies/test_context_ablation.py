"""Transformer-XL's Table 5 / RECL study (studies.context_ablation) end to end on a tiny
setting: two variants that differ in encoding, recurrence and loss, the tables and plots."""

import json

from xlnet_tf.pretraining.data import corpus
from xlnet_tf.studies import context_ablation


def test_study_trains_the_group_and_writes_table5_and_recl(tmp_path):
  documents = corpus.python_docs_documents()
  corpus.write_corpus_files(documents[:24], str(tmp_path / "train"), num_files=2)
  corpus.write_corpus_files(documents[30:34], str(tmp_path / "valid"), num_files=1)
  recipe = context_ablation.RECIPE.replace(
      model_size="tiny", vocab_size=300, seq_len=16, mem_len=16, bsz_per_host=4,
      train_steps=3, warmup_steps=1, eval_every=3, jit_compile=False)
  variants = {name: context_ablation.VARIANTS[name]
              for name in ("relative", "absolute_sinusoid_no_recurrence_half")}
  study = context_ablation.ContextStudyOptions(
      output_dir=str(tmp_path / "study"),
      train_files=sorted(str(p) for p in (tmp_path / "train").iterdir()),
      held_out_files=sorted(str(p) for p in (tmp_path / "valid").iterdir()),
      variants=variants, pretraining=recipe, seeds=(0,), attention_lengths=(16, 32, 48),
      eval_tokens=600, recl_lengths=(8, 16, 24), recl_tokens=12)
  summary = context_ablation.run_study(study, printer=lambda line: None)
  out = tmp_path / "study"
  rows = summary["table5"]
  assert list(rows) == list(variants)
  # Trained with recurrence: segment 16 + memory 16 = 32; without: the segment, 16.
  runs = summary["runs"]
  assert runs["relative-seed0"]["train_attention_length"] == 32
  assert runs["absolute_sinusoid_no_recurrence_half-seed0"]["train_attention_length"] == 16
  relative_rows = runs["relative-seed0"]["perplexities"]
  assert [(r["tgt_len"], r["mem_len"]) for r in relative_rows] == [(16, 0), (16, 16), (16, 32)]
  absolute_rows = runs["absolute_sinusoid_no_recurrence_half-seed0"]["perplexities"]
  assert [(r["tgt_len"], r["mem_len"]) for r in absolute_rows] == [(16, 0), (32, 0), (48, 0)]
  assert rows["relative"]["ppl_init"] == relative_rows[1]["perplexity"]
  assert rows["relative"]["ppl_best"] == min(r["perplexity"] for r in relative_rows)
  assert sorted(summary["recl"]) == ["0.1", "0.5", "1.0"]
  assert all(set(by_r["recl"]) == set(variants) and
             all(value in (8, 16, 24) for value in by_r["recl"].values())
             for by_r in summary["recl"].values())
  saved = json.load(open(out / "runs" / "relative-seed0" / "lm" / "xlnet_config.json"))
  assert (saved["pos_encoding"], saved["mem_len"]) == ("relative", 16)
  absolute = json.load(open(out / "runs" / "absolute_sinusoid_no_recurrence_half-seed0" / "lm" /
                            "xlnet_config.json"))
  assert (absolute["pos_encoding"], absolute["mem_len"]) == ("absolute_sinusoid", 0)
  text = (out / "results.md").read_text()
  assert "| relative | yes | relative | full |" in text
  assert "| absolute_sinusoid_no_recurrence_half | no | absolute_sinusoid | half |" in text
  for png in ("perplexity.png", "recl.png"):
    assert (out / png).read_bytes()[:4] == b"\x89PNG"
  # Run again: every run and the RECL losses are reused.
  assert context_ablation.run_study(study, printer=lambda line: None)["table5"] == rows
  # The figures again from the saved results alone (how the docs' figures are drawn).
  again = context_ablation.plot_figures(json.load(open(out / "results.json")), str(tmp_path),
                                        "again_")
  assert [path.rsplit("/", 1)[1] for path in again] == ["again_perplexity.png", "again_recl.png"]
  assert all(open(path, "rb").read(4) == b"\x89PNG" for path in again)


def test_every_variant_has_a_look_of_its_own_that_says_what_it_is():
  styles = context_ablation.variant_styles(context_ablation.VARIANTS)
  assert len({tuple(sorted(style.items())) for style in styles.values()}) == len(styles) == 11
  assert styles["relative"]["color"] == styles["relative_no_recurrence_half"]["color"]
  assert styles["relative"]["linestyle"] == "-"  # with recurrence
  assert styles["relative_no_recurrence_half"]["linestyle"] == "--"
  assert styles["shaw_no_recurrence_half"]["marker"] == styles["relative_half"]["marker"] != (
      styles["relative"]["marker"])
