"""`xlnet-make-manual-page-tasks` from the checkout:
xlnet_tf/cli/make_manual_page_tasks.py."""

from xlnet_tf.cli import make_manual_page_tasks

if __name__ == "__main__":
  make_manual_page_tasks.entry()
