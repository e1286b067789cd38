"""Data: tokenization, pretraining examples (spans, factorization orders), TFRecords, readers."""
