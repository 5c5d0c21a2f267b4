"""a2x-local: local-first, offline service discovery for AI agents."""

from a2x_local.errors import A2XError, UserError

__version__ = "0.1.0"

__all__ = ["A2XError", "UserError", "__version__"]
