"""A model's own files: which of them trncat fetches, and the gates they pass before anything of them is loaded.

- :mod:`~pipeline.models.gates`: the remote-code gates on config.json, model_index.json and modules.json (read
  as data; nothing of a repo is ever imported);
- :mod:`~pipeline.models.fetch`: a local folder or a Hub id resolved to a folder at a revision, with no code file;
- :mod:`~pipeline.models.select`: which files of a repo that is, by exact path, and the bytes they may take;
- :mod:`~pipeline.models.family`: the model's family from its small files (architecture, model_type, the base
  models its card or adapter config names);
- :mod:`~pipeline.models.safetensors`: parameters and bytes from the ``*.safetensors`` headers alone.

May import: the top-level modules (errors, ids) and :mod:`pipeline.hub` (for typing; the caller passes the
``Hub``; the card's front matter). Imported by: :mod:`pipeline.plan` (the gate on a pipeline's index),
:mod:`pipeline.bench` (fetch and gates before a run; the record's family), :mod:`pipeline.check` (the gates and
the family of a model the catalog has not measured), :mod:`pipeline.serve` (fetch, gates, parameters).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.models.family import (
        ADAPTER_CONFIG,
        FAMILY_FILES,
        MAX_FILE_BYTES,
        Family,
        folder_family,
        read_small_json,
        transformer_config_path,
    )
    from pipeline.models.fetch import (
        ResolvedModel,
        resolve_hub,
        resolve_local,
    )
    from pipeline.models.gates import (
        check_model_index,
        check_remote_code,
        read_config,
        read_model_index,
        refusal,
    )
    from pipeline.models.safetensors import safetensors_bytes, safetensors_param_count


lazy_face(__name__)
