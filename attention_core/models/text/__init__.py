"""A checkpoint as the app's text model: tokenizer, one text's forward pass,
generation, head traces."""
