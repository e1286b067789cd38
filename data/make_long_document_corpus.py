"""`xlnet-make-long-document-corpus` from the checkout:
xlnet_tf/cli/make_long_document_corpus.py."""

from xlnet_tf.cli import make_long_document_corpus

if __name__ == "__main__":
  make_long_document_corpus.entry()
