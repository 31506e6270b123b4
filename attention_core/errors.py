"""The one exception type of the package."""


class SpecError(ValueError):
    """A spec or a tensor argument breaks a rule.

    ``field`` names the offending input (``"tokens"``, ``"projection.W_key"``, …)
    so that a web layer can point at it; the message names the value and the rule.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
