"""Loading Avro files from Cloud Storage into BigQuery, with the Avro schema's doc as the table's description.

Needs the ``bigquery_avro`` extra: google-api-python-client and fastavro, which reads the schema from the
head of the first file (Luigi used the ``avro`` package; only the schema is read, so either serves).
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from luigi.contrib.bigquery import BigQueryLoadTask, SourceFormat, _bigquery_output
from luigi.contrib.optional import require
from luigi.task import flatten

__all__ = ["BigQueryLoadAvro"]

logger = logging.getLogger("luigi-interface")

# The schema sits in the file's header: a first chunk this size nearly always holds it.
_HEAD_CHUNK = 64 * 1024


class BigQueryLoadAvro(BigQueryLoadTask):
    """Load the input's Avro files (``*.avro`` under each input path) and copy the writer schema's ``doc``
    to the table's description (a failure there is only a warning: the data is loaded)."""

    @property
    def source_format(self) -> str:
        return SourceFormat.AVRO

    @staticmethod
    def _avro_uri(target: Any) -> str:
        """The target's path as Avro files: kept when it names one file, else every ``*.avro`` under it."""
        uri = str(getattr(target, "uri", None) or target.path)  # Luigi accepts targets with a uri or a path
        return uri if uri.endswith(".avro") else uri.rstrip("/") + "/*.avro"

    def source_uris(self) -> list[str]:
        return [self._avro_uri(target) for target in flatten(self.input())]

    def _input_fs(self) -> Any:
        """The first input's file system, else a GCS client (for inputs that are not file system targets)."""
        first = flatten(self.input())[0]
        if hasattr(first, "fs"):  # Luigi's rule: a FileSystemTarget's own client, so tests and mocks hold
            return first.fs
        return importlib.import_module("luigi.contrib.gcs").GCSClient()

    def _get_input_schema(self) -> Any:
        """The writer schema of the first input file, read from the head of its download."""
        fastavro = require("fastavro", "bigquery_avro", "luigi.contrib.bigquery_avro")
        fs = self._input_fs()
        uri = self.source_uris()[0]
        if "*" in uri:
            matches = list(fs.list_wildcard(uri))
            if not matches:
                raise RuntimeError(f"No match for {uri}: no Avro file to read the schema from")
            uri = matches[0]
        found: list[Any] = []
        failures: list[Exception] = []

        def read_schema(fp: Any) -> bool:
            """Whether the part downloaded so far holds the header; the download stops once it does."""
            position = fp.tell()
            try:
                fp.seek(0)
                found.append(self._get_writer_schema(fastavro.reader(fp)))
                return True
            except Exception as exc:  # a header cut short fails in several ways; kept for the end
                failures.append(exc)
                return False
            finally:
                fp.seek(position)

        fs.download(uri, _HEAD_CHUNK, read_schema).close()
        if not found:
            last = failures[-1]
            raise ValueError(f"{uri} holds no Avro header fastavro can read: {last}") from last
        return found[0]

    @staticmethod
    def _get_writer_schema(datum_reader: Any) -> Any:
        """The schema the file was written with (fastavro's reader, or avro's DatumReader)."""
        return datum_reader.writer_schema

    def _set_output_doc(self, schema: Any) -> None:
        """The schema's ``doc`` as the output table's description; nothing when it has none."""
        doc = schema.get("doc") if isinstance(schema, dict) else schema.doc
        if not doc:
            return
        output = _bigquery_output(self)
        table = output.table
        tables = output.client.client.tables()
        body = {"description": doc}
        tables.patch(
            projectId=table.project_id, datasetId=table.dataset_id, tableId=table.table_id, body=body
        ).execute()

    def run(self) -> None:
        super().run()
        try:
            self._set_output_doc(self._get_input_schema())
        except Exception as exc:  # the data is loaded; a missing description must not fail it
            logger.warning("Could not propagate the Avro doc to BigQuery table %s: %s", self.output(), exc)
