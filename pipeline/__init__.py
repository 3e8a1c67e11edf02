"""trncat: which Hugging Face models run unmodified on AWS Trainium2, and how well."""

from __future__ import annotations

__version__ = "0.1.0"
