"""The notebook API: attention views that render inline, self-contained and offline."""

from .analysis import Analysis, attribute, why
from .figures import figure
from .render import NotebookView
from .views import explore, head_view, model_view, show

__all__ = [
    "Analysis",
    "NotebookView",
    "attribute",
    "explore",
    "figure",
    "head_view",
    "model_view",
    "show",
    "why",
]
