"""The original XLNet text preprocessing, written out literally from its definition
(zihangdai/xlnet prepro_utils.py: preprocess_text, encode_pieces, encode_ids) as an independent
reference for the tokenizer tests."""

import unicodedata

SPIECE_UNDERLINE = "\u2581"


def original_preprocess(inputs, lower=False, remove_space=True, keep_accents=False):
  outputs = " ".join(inputs.strip().split()) if remove_space else inputs
  outputs = outputs.replace("``", '"').replace("''", '"')
  if not keep_accents:
    outputs = unicodedata.normalize("NFKD", outputs)
    outputs = "".join([c for c in outputs if not unicodedata.combining(c)])
  if lower:
    outputs = outputs.lower()
  return outputs


def original_encode_ids(sp_model, text):
  pieces = sp_model.EncodeAsPieces(text)
  new_pieces = []
  for piece in pieces:
    if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
      cur_pieces = sp_model.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
      if piece[0] != SPIECE_UNDERLINE and cur_pieces[0][0] == SPIECE_UNDERLINE:
        if len(cur_pieces[0]) == 1:
          cur_pieces = cur_pieces[1:]
        else:
          cur_pieces[0] = cur_pieces[0][1:]
      cur_pieces.append(piece[-1])
      new_pieces.extend(cur_pieces)
    else:
      new_pieces.append(piece)
  return [sp_model.PieceToId(piece) for piece in new_pieces]
