"""`xlnet-probe-features` from the checkout:
xlnet_tf/cli/probe_features.py."""

from xlnet_tf.cli import probe_features

if __name__ == "__main__":
  probe_features.entry()
