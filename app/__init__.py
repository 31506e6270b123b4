"""attention-viz web app: the JSON API and the pages, over attention_core."""
