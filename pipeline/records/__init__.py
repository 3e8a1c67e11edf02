"""The result record, the contract between the benchmark and everything after it.

- :mod:`~pipeline.records.validate`: the schema (``schemas/result.schema.json``), JSON-Schema plus semantic
  validation, strict parsing and dumping, the files of a folder checked one by one;
- :mod:`~pipeline.records.task_checks`: the checks that depend on a record's task (metric sets, answer check);
- :mod:`~pipeline.records.columns`: the record's flat Arrow form (one row per record, snake_case columns, each
  kind's Arrow type);
- :mod:`~pipeline.records.rows`: the representative row of a model, a row's toolchain label;
- :mod:`~pipeline.records.collect`: which downloaded benchmark artifacts a publish may trust (a record, and its
  compiled-cache bundle beside it);
- :mod:`~pipeline.records.bundles`: where a record's compiled-cache bundle lives, and who may name one;
- :mod:`~pipeline.records.families`: how each measured model fared (its family row) and, per architecture, how
  the family fared on Trainium2 (what ``trncat check`` and the page's table by architecture show);
- :mod:`~pipeline.records.plausible`: the figures no real run can have (the submission check's extra rules);
- :mod:`~pipeline.records.types`: the record kinds as classes (result record, its serving and run sections, warm
  check), serialised to the JSON their schemas describe;
- :mod:`~pipeline.records.spread`: a timed figure's 95 % interval from its repeats, and whether two figures differ
  (the release diff's verdicts);
- :mod:`~pipeline.records.warm`: the second-machine warm check's schema and semantic rules (what a publish stores).

May import: the top-level modules and :mod:`pipeline.backends` (a row's toolchain label is its backend's; the
compiled-cache bundle's rule is the Neuron backend's; a GPU's bandwidth, which bounds a serving point).
Imported by: every stage that makes, stores or shows a record (bench, dataset, discover, queue, publish, the
page, release, space, the CLI).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.records.bundles import bundle_folder, bundle_path, workload_key
    from pipeline.records.collect import collect_records
    from pipeline.records.columns import (
        COLUMN_NAMES,
        COLUMNS,
        LAYOUT_VERSION,
        OPTIONAL_COLUMNS,
        arrow_schema,
        arrow_type,
        column_value,
        flatten,
        parse_time,
        record_id,
        unflatten,
    )
    from pipeline.records.families import (
        FAMILY_COLUMNS,
        MEASURED,
        TRAINIUM,
        FamilyStat,
        evidence,
        evidence_order,
        family_order,
        family_row,
        family_stat,
        family_stats,
        one_per_model,
        rows_of,
        trainium3_rows,
        trainium_rows,
    )
    from pipeline.records.plausible import plausibility_problems
    from pipeline.records.rows import device_of, representative, toolchain_label
    from pipeline.records.spread import (
        FLOOR,
        FLOORS,
        VERDICTS,
        merge_rounds,
        point_spread,
        ratio_interval,
        record_spread,
        remeasured,
        verdict,
        verdict_counts,
        verdict_of,
    )
    from pipeline.records.types import (
        OPTIONAL_METRICS,
        ResultRecord,
        RunInfo,
        Serving,
        WarmCheck,
        WarmStatus,
    )
    from pipeline.records.validate import (
        SCHEMA_VERSION,
        VERSION_TEXT,
        Problem,
        check_file,
        dump_record,
        load_schema,
        parse_record,
        printable,
        schema_validator,
        validate_paths,
        validate_record,
    )
    from pipeline.records.warm import (
        MAX_WARM_CHECK_BYTES,
        WARM_FIELDS,
        counts_as_trainium2,
        warm_check_problems,
    )


lazy_face(__name__)
