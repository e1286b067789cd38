"""`xlnet-make-long-document-task` from the checkout:
xlnet_tf/cli/make_long_document_task.py."""

from xlnet_tf.cli import make_long_document_task

if __name__ == "__main__":
  make_long_document_task.entry()
